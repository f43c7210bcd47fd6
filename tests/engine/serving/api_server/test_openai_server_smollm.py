"""`python -m engine serve` with the real SmolLM2 in its own process: the same greedy text as the engine's
`generate` (what `python -m engine generate` runs), a client that hangs up frees its sequence, and `engine measure`
agrees with the server's own metrics."""
import http.client
import json
import time

import pytest

from engine.serving.client.benchmark_report import client_stats
from engine.serving.client.server_benchmark import Plan, run
from tests.serving_helpers import CliServer, free_port, metrics_of, post

PROMPT = "Why is the sky blue? Answer in two sentences."
AGREE = 0.20  # client-side and server-side means may differ by the HTTP hop, not more


@pytest.fixture(scope="module")
def real_server():
    srv = CliServer("--model", "smollm2-135m", port=free_port())
    yield srv
    srv.close()
    assert srv.proc.returncode is not None  # nothing left running


def test_the_server_says_where_it_listens_and_answers_to_the_hub_id_first(real_server):
    assert any("serving 'HuggingFaceTB/SmolLM2-135M-Instruct' (also as 'smollm2-135m')" in line and
               real_server.url in line for line in real_server.lines)
    status, _, listed = post(real_server.url, "/v1/models", None, method="GET")
    assert [m["id"] for m in listed["data"]] == ["HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m"]


def test_greedy_text_equals_the_engines(real_server, smollm):
    """The server's greedy text is what `python -m engine generate` writes: the same `generate` (engine/cli.py calls
    it), here in process on the same weights rather than in two more processes that each import torch."""
    from engine import generate

    status, _, completion = post(real_server.url, "/v1/completions", {"model": "smollm2-135m", "prompt": PROMPT,
                                                                       "max_tokens": 24, "temperature": 0})
    assert status == 200 and completion["choices"][0]["text"] == generate(smollm, PROMPT, 24).text
    status, _, chat = post(real_server.url, "/v1/chat/completions", {
        "model": "smollm2-135m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 24, "temperature": 0})
    assert status == 200 and chat["choices"][0]["message"]["content"] == generate(smollm, PROMPT, 24, chat=True).text


def test_a_client_that_hangs_up_frees_its_sequence(real_server):
    before = metrics_of(real_server.url)
    port = int(real_server.url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"model": "smollm2-135m", "prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "temperature": 0, "stream": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    seen = 0
    while seen < 3:  # read three tokens, then leave
        seen += resp.readline().startswith(b"data:")
    conn.sock.close()
    conn.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = metrics_of(real_server.url)
        if now["vllm:num_requests_running"] == 0 and now.get("vllm:request_success_total", 0) > before.get("vllm:request_success_total", 0):
            break
        time.sleep(0.2)
    generated = now["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert now["vllm:num_requests_running"] == 0 and generated < 100  # far from the 400 it asked for


def test_measure_agrees_with_the_servers_own_metrics(real_server):
    records, facts = run(Plan(real_server.url, prompt_tokens=64, max_new_tokens=16, requests=3))
    assert facts["tokenizer"] == "server" and all(r["prompt_tokens"] == 64 and r["output_tokens"] == 16 for r in records)
    client, server = client_stats(records), facts["server_metrics"]
    assert server["ttft"]["count"] == 3 and server["itl"]["count"] == 3 * 15
    assert client["ttft"]["mean"] == pytest.approx(server["ttft"]["mean_seconds"], rel=AGREE)
    assert client["itl"]["mean"] == pytest.approx(server["itl"]["mean_seconds"], rel=AGREE)
    assert server["generation_tokens"] == 3 * 16 and server["prompt_tokens"] == 3 * 64
