"""server_measurement.traffic_command: the flags it writes rebuild exactly the Traffic lab's workload in `engine measure`."""
import math

import pytest

import engine.serving.client.traffic_benchmark as traffic_benchmark
from engine.cli import main
from engine.perfmodel.workload import shaped
from ui.engine_link import server_measurement


@pytest.mark.parametrize("workload", [
    shaped("summarisation", request_rate=0.7, burstiness=0.5, prompt_tokens=300, prompt_spread=0.25, num_requests=7),
    shaped("chat", request_rate=math.inf, output_tokens=2000, output_spread=0.0, num_requests=3),
])
def test_replay_flags_rebuild_the_same_workload(monkeypatch, workload):
    seen = {}

    def fake_run(plan, on_record=None):
        seen["plan"] = plan
        return [], {}
    monkeypatch.setattr(traffic_benchmark, "run_traffic", fake_run)
    cmd = server_measurement.traffic_command("http://127.0.0.1:9", "m", workload, 11)
    assert main(cmd[3:]) == 0
    assert seen["plan"].workload == workload and seen["plan"].seed == 11 and seen["plan"].model == "m"
