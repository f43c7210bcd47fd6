"""The same traffic against a real vLLM (CPU build) started by scripts/start_vllm.sh with chunked prefill on and off.

One vLLM per setting (1-2.5 minutes each to start on 2 cores), skipped like tests/engine/serving/client/test_vllm.py
when vLLM's venv is missing (scripts/test.sh installs it and sets TWO_BENDS_REQUIRE_VLLM=1: then it must run).
"""
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from engine.perfmodel.goodput import SLO
from engine.perfmodel.workload import arrivals, shaped
from engine.serving.client.openai_client import Client
from engine.serving.client.traffic_benchmark import TrafficPlan, run_traffic, traffic_summary
from tests.engine.serving.client.test_vllm import VENV, _tail
from tests.serving_helpers import ROOT, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["on", "off"])
def vllm(request):
    if os.environ.get("TWO_BENDS_SKIP_VLLM") == "1":
        pytest.skip("TWO_BENDS_SKIP_VLLM=1: vLLM left out")
    if not (VENV / ".two-bends-vllm-ready").is_file() and not os.environ.get("TWO_BENDS_REQUIRE_VLLM"):
        pytest.skip(f"vLLM's CPU venv is not installed at {VENV}: run bash scripts/setup_vllm.sh (scripts/test.sh does)")
    port, timeout = free_port(), float(os.environ.get("VLLM_START_TIMEOUT", 600))
    log = Path(tempfile.mkstemp(prefix="vllm-traffic-", suffix=".log")[1])
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "scripts/start_vllm.sh", str(port), "--foreground", "--chunked-prefill",
                                 request.param], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url, start = f"http://127.0.0.1:{port}", time.monotonic()
    try:
        while True:
            try:
                if Client(url, timeout=2).call("GET", "/health")[0] == 200:
                    break
            except Exception:
                pass
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited during start-up (code {proc.returncode}); its log {log} ends:\n{_tail(log)}")
            if time.monotonic() - start > timeout:
                pytest.fail(f"vLLM did not answer /health within {timeout:.0f} s; log {log}:\n{_tail(log)}")
            time.sleep(1)
        yield request.param, url, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def test_traffic_mode_against_vllm_with_and_without_chunked_prefill(vllm):
    chunked, url, log = vllm
    text = log.read_text(errors="replace")
    assert ("Chunked prefill is enabled with max_num_batched_tokens=256" in text) == (chunked == "on")
    w = shaped("summarisation", request_rate=float("inf"), prompt_tokens=300, prompt_spread=0.0, output_tokens=6,
               output_spread=0.0, num_requests=3)  # 300 tokens > the 256-token budget: cut in two when chunked
    records, facts = run_traffic(TrafficPlan(url, w, seed=0, warmup=1))
    assert facts["ignore_eos"] and facts["tokenizer"] == "server"
    assert [(r["prompt_tokens"], r["output_tokens"]) for r in records] == [(a.prompt_tokens, a.output_tokens)
                                                                          for a in arrivals(w, 0)]
    assert facts["server_metrics"]["ttft"]["count"] == 3
    assert traffic_summary(records, SLO(1e6, 1e6))["good"] == 3
