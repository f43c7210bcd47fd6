"""A real vLLM (CPU build, our SmolLM2 weights) measured by `engine measure`, and checked against our own server.

vLLM lives in its own venv outside the clone (scripts/setup_vllm.sh; scripts/test.sh builds it once
and sets TWO_BENDS_REQUIRE_VLLM=1, so there a missing or broken vLLM fails instead of skipping).
One vLLM with chunked prefill on serves these tests and the room's (tests/conftest.py: shared, started once, stopped
after the last test using it), from tests/serving_helpers.vllm_server (scripts/start_vllm.sh --foreground, its own
process group, always killed).
"""

import json
import subprocess

import pytest

from engine.perfmodel.goodput import SLO
from engine.perfmodel.workload import arrivals, shaped
from engine.serving.client.benchmark_report import client_stats
from engine.serving.client.server_benchmark import Plan, run
from engine.serving.client.traffic_benchmark import TrafficPlan, run_traffic, traffic_summary
from tests import ROOT
from tests.serving_helpers import CliServer, free_port, means_agree_in_one_of_two, metrics_of, post, require_vllm_venv

NAME = "smollm2-135m-instruct"
AGREE = 0.20


def test_measure_agrees_with_vllms_own_histograms(vllm_url):
    """Measured at most twice: once, with browser tests beside it, our TTFT read 2.1x vLLM's (373 against 176 ms)."""
    def measure() -> dict:
        records, facts = run(Plan(vllm_url, prompt_tokens=64, max_new_tokens=16, requests=3))
        assert facts["model"] == NAME and facts["tokenizer"] == "server" and facts["ignore_eos"]
        shapes = [(r["prompt_tokens"], r["output_tokens"], len(r["steps"])) for r in records]
        # (prompt tokens, output tokens, gaps between streamed chunks): a gap per token after the first, unless vLLM
        # sent two tokens in one chunk, as it does when its output lags on a busy machine (no gap the client could see)
        assert all(shape[:2] == (64, 16) and shape[2] <= 15 for shape in shapes), shapes
        if not all(shape[2] >= 12 for shape in shapes):  # more than 3 of 15 gaps merged: vLLM lagged, measure again
            return f"vLLM sent 16 tokens in fewer than 13 chunks: {shapes}"
        client, server = client_stats(records), facts["server_metrics"]
        assert server["ttft"]["count"] == 3 and server["generation_tokens"] == 48
        return {key: (client[key]["mean"], server[key]["mean_seconds"]) for key in ("ttft", "itl")}

    means_agree_in_one_of_two(measure, AGREE, "our client, vLLM's histograms")


def test_concurrent_requests_get_whole_run_metrics(vllm_url):
    records, facts = run(Plan(vllm_url, prompt_tokens=32, max_new_tokens=8, requests=4, concurrency=2, warmup=0))
    assert len(records) == 4 and {r["server_metrics"]["scope"] for r in records} == {"run"}
    assert facts["server_metrics"]["ttft"]["count"] == 4
    assert len({tuple(r["prompt_ids"][:4]) for r in records}) == 4  # every prompt its own: no prefix cache helps


def test_our_server_and_vllm_write_the_same_greedy_tokens(vllm_url):
    ours = CliServer("--model", "smollm2-135m", port=free_port())
    try:
        messages = [{"role": "user", "content": "Write a short poem about the sea."}]
        ids = post(vllm_url, "/tokenize", {"model": NAME, "messages": messages, "add_generation_prompt": True})[2]["tokens"]
        assert post(ours.url, "/tokenize", {"messages": messages})[2]["tokens"] == ids  # the same chat template
        body = {"prompt": ids, "max_tokens": 24, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
        theirs = post(vllm_url, "/v1/completions", dict(body, model=NAME))[2]["choices"][0]
        mine = post(ours.url, "/v1/completions", dict(body, model="smollm2-135m"))[2]["choices"][0]
        assert mine["token_ids"] == theirs["token_ids"] and mine["text"] == theirs["text"]
    finally:
        ours.close()


def _traffic_mode_check(chunked: str, url: str, log) -> None:
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


def test_traffic_mode_against_vllm_with_chunked_prefill(vllm_chunked):
    _traffic_mode_check("on", *vllm_chunked)


def test_vllms_own_benchmark_client_runs_against_our_server(tmp_path):
    """`vllm bench serve` (benchmarks/vllm_bench_serve.sh) on both endpoints of `engine serve`: every request completes,
    every token is counted, and its ITL is the one our server's own histogram measured."""
    require_vllm_venv()
    ours = CliServer("--model", "smollm2-135m", port=free_port())
    try:
        for backend, endpoint in (("openai-chat", "/v1/chat/completions"),):  # the chat path, its template too (the
            # completions endpoint: the same client code; our own client's tests measure it against this server)
            before = metrics_of(ours.url)
            done = subprocess.run(["bash", "benchmarks/vllm_bench_serve.sh", "--base-url", ours.url, "--backend", backend,
                                   "--endpoint", endpoint, "--dataset-name", "random", "--random-input-len", "48",
                                   "--random-output-len", "6", "--num-prompts", "3", "--max-concurrency", "2",
                                   "--ignore-eos", "--temperature", "0", "--save-result", "--result-dir", str(tmp_path),
                                   "--result-filename", f"{backend}.json"],
                                  cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            result = json.loads((tmp_path / f"{backend}.json").read_text())
            assert (result["completed"], result["failed"], result["total_output_tokens"]) == (3, 0, 18), backend
            after = metrics_of(ours.url)
            grew = {name: after[name] - before.get(name, 0.0) for name in after}
            assert grew["vllm:request_success_total"] == 3 and grew["vllm:generation_tokens_total"] == 18
            server_itl = grew["vllm:inter_token_latency_seconds_sum"] / grew["vllm:inter_token_latency_seconds_count"]
            assert result["mean_itl_ms"] / 1000 == pytest.approx(server_itl, rel=AGREE), backend
    finally:
        ours.close()
