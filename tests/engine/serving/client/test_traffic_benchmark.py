"""`python -m engine measure` in traffic mode against our own server (tiny model, continuous batching, in this process)."""
import json
import math

import pytest

from engine.cli import main
from engine.perfmodel.goodput import SLO
from engine.perfmodel.workload import arrivals, shaped
from engine.serving.client.traffic_benchmark import TrafficPlan, outcomes, run_traffic, traffic_summary
from tests.serving_helpers import InProcessServer


@pytest.fixture(scope="module")
def server():
    srv = InProcessServer("tiny-llama", mode="batch")
    yield srv
    srv.close()


def test_a_burst_arrives_at_once_with_its_drawn_lengths(server):
    w = shaped(None, request_rate=math.inf, prompt_tokens=20, prompt_spread=0.4, output_tokens=5, output_spread=0.3,
               num_requests=5)
    records, facts = run_traffic(TrafficPlan(server.url, w, seed=4, warmup=0))
    plan = arrivals(w, 4)
    assert [r["prompt_tokens"] for r in records] == [a.prompt_tokens for a in plan]  # exact, counted by the server
    assert [r["output_tokens"] for r in records] == [a.output_tokens for a in plan]  # ignore_eos
    # each its own tag (8 random hex digits): no shared prefix. The tiny tokenizer spends ~a token per digit, so the
    # first 4 tokens held only 3 digits, and two of five tags shared them one run in a few hundred
    assert len({tuple(r["prompt_ids"][:12]) for r in records}) == 5
    assert all(r["arrived_s"] == 0.0 and r["source"] == "server" for r in records)
    assert facts["server_metrics"]["scope"] == "run" and facts["server_metrics"]["ttft"]["count"] == 5
    s = traffic_summary(records, SLO(1e6, 1e6))
    assert s["requests"] == 5 and s["good"] == 5 and s["goodput"] == pytest.approx(s["throughput"])
    assert s["ttft_p50"] <= s["ttft_p99"] and s["itl_p50"] <= s["itl_p99"]
    assert traffic_summary(records, SLO(1e-9, 1e-9))["goodput"] == 0.0


def test_poisson_requests_are_sent_at_their_arrival_times(server):
    w = shaped("code", request_rate=20.0, prompt_tokens=8, output_tokens=3, num_requests=4)
    records, _ = run_traffic(TrafficPlan(server.url, w, seed=1, warmup=1))
    plan = arrivals(w, 1)
    assert [r["arrived_s"] for r in records] == [a.at_s for a in plan] and plan[-1].at_s > 0
    assert all(r["sent_s"] >= r["arrived_s"] for r in records)  # never early
    assert all(o.finished_s > o.arrived_s for o in outcomes(records))


def test_cli_traffic_json_lines_and_summary(server, capsys):
    args = ["measure", "--url", server.url, "--request-rate", "inf", "--prompt-tokens", "10", "--max-new-tokens", "3",
            "--requests", "3", "--warmup", "0"]
    assert main(args + ["--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["request_rate"] == math.inf for line in lines)
    assert main(args + ["--slo-ttft-ms", "100000", "--slo-tpot-ms", "100000"]) == 0
    out = capsys.readouterr().out
    assert "TTFT p50 / p99" in out and "goodput" in out and "(3/3 met" in out and "a burst" in out


@pytest.mark.parametrize("extra, needle", [
    (["--burstiness", "2"], "--burstiness belongs to the traffic mode"),
    (["--request-rate", "0", "--prompt-tokens", "8", "--max-new-tokens", "2"], "request rate must be from 0.001 to"),
    (["--request-rate", "nan", "--prompt-tokens", "8", "--max-new-tokens", "2"], "request rate must be from 0.001 to"),
    (["--request-rate", "1"], "give the prompt and output lengths"),
    (["--workload", "chat", "--burstiness", "-1"], "burstiness must be"),
    (["--workload", "chat", "--requests", "5000"], "--requests must be from 1 to 1,000"),
    (["--workload", "chat", "--slo-ttft-ms", "0"], "TTFT objective"),
    ([], "give --prompt-tokens and --max-new-tokens"),
])
def test_traffic_errors_are_one_line(server, capsys, extra, needle):
    assert main(["measure", "--url", server.url, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and len(err.splitlines()) == 1
