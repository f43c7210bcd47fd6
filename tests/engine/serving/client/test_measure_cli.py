"""`python -m engine measure` against our own server (tiny model, in this process) and against servers that
are not there, not OpenAI-compatible, too slow or refusing: records shaped like Traces, one-line errors."""
import http.server
import json
import threading

import pytest

import engine
from engine.cli import main
from engine.errors import EngineError
from engine.serving.client.benchmark_report import format_report
from engine.serving.client.openai_client import Client, parse_url
from engine.serving.client.server_benchmark import Plan, build_prompts, run, trace_from_record
from tests.serving_helpers import InProcessServer


@pytest.fixture(scope="module")
def server():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


def test_records_are_trace_shaped_with_exact_lengths(server):
    records, facts = run(Plan(server.url, prompt_tokens=40, max_new_tokens=6, requests=2))
    assert facts["tokenizer"] == "server" and facts["model"] == "tiny-llama"
    for i, rec in enumerate(records, start=1):
        assert rec["source"] == "server" and rec["url"] == server.url and rec["request"] == i
        assert rec["prompt_tokens"] == 40 and rec["output_tokens"] == 6 and len(rec["steps"]) == 5
        assert rec["e2e_seconds"] == pytest.approx(rec["prefill_seconds"] + sum(s["seconds"] for s in rec["steps"]))
        per_request = rec["server_metrics"]
        assert per_request["scope"] == "request" and per_request["ttft"]["count"] == 1 and per_request["generation_tokens"] == 6
    trace = trace_from_record(json.loads(json.dumps(records[0])))
    summary = engine.summarize(trace)
    assert trace.source == "server" and trace.model_config is None and trace.attention is None
    assert summary.prompt_tokens == 40 and summary.output_tokens == 6
    assert summary.ttft_s == records[0]["prefill_seconds"] and summary.total_s == pytest.approx(records[0]["e2e_seconds"])
    assert trace.output_ids == records[0]["output_ids"] and trace.text == records[0]["text"]


def test_prompts_are_distinct_unless_a_shared_prefix_is_asked_for(server):
    client = Client(server.url)
    unique = build_prompts(client, "tiny-llama", 30, 3, shared_prefix=False)
    shared = build_prompts(client, "tiny-llama", 30, 3, shared_prefix=True)
    assert all(len(p) == 30 for p in unique.ids + shared.ids)
    assert len({p[0] for p in unique.ids}) > 1 or len({tuple(p[:3]) for p in unique.ids}) == 3
    assert len({tuple(p[:15]) for p in shared.ids}) == 1 and len({tuple(p) for p in shared.ids}) == 3


def test_without_a_tokenize_endpoint_our_tokenizer_counts(server, monkeypatch):
    real_call = Client.call

    def no_tokenize(self, method, path, body=None):
        return (404, b'{"detail": "Not Found"}') if path == "/tokenize" else real_call(self, method, path, body)

    monkeypatch.setattr(Client, "call", no_tokenize)
    records, facts = run(Plan(server.url, prompt_tokens=20, max_new_tokens=3, warmup=0))
    assert facts["tokenizer"] == "ours" and records[0]["output_tokens"] == 3
    assert "our SmolLM2 tokenizer" in format_report(records, facts)


def test_concurrency_runs_requests_side_by_side(server):
    records, facts = run(Plan(server.url, prompt_tokens=16, max_new_tokens=4, requests=4, concurrency=2, warmup=0))
    assert [r["request"] for r in records] == [1, 2, 3, 4]
    assert facts["server_metrics"]["scope"] == "run" and facts["server_metrics"]["ttft"]["count"] == 4


def test_cli_summary_puts_client_and_server_side_by_side(server, capsys):
    assert main(["measure", "--url", server.url + "/v1", "--prompt-tokens", "24", "--max-new-tokens", "5"]) == 0
    out = capsys.readouterr().out
    assert "client-side" in out and "server-side" in out and "TTFT" in out and "prompt 24 tokens" in out


def test_cli_json_is_one_object_per_request(server, capsys):
    assert main(["measure", "--url", server.url, "--prompt-tokens", "8", "--max-new-tokens", "3", "--requests", "3",
                 "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and [json.loads(line)["request"] for line in lines] == [1, 2, 3]


class _NotOpenAI(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>a web page</html>")

    def log_message(self, *args):
        pass


class _Silent(_NotOpenAI):
    def do_GET(self):
        threading.Event().wait(3)  # accepts, never answers in time


def _serve(handler):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.mark.parametrize("kind,needle", [("refused", "connection refused"), ("bad url", "bad URL"),
                                         ("scheme", "bad URL"), ("not openai", "does not look like an OpenAI-compatible"),
                                         ("timeout", "did not answer within"), ("unknown model", "does not serve"),
                                         ("http error", "answered HTTP 400"), ("bad numbers", "--requests")])
def test_cli_errors_are_one_line(server, capsys, kind, needle):
    extra, srv = [], None
    if kind == "refused":
        url = "http://127.0.0.1:9"
    elif kind == "bad url":
        url = "http://127.0.0.1:notaport"
    elif kind == "scheme":
        url = "ftp://127.0.0.1"
    elif kind in ("not openai", "timeout"):
        srv, url = _serve(_NotOpenAI if kind == "not openai" else _Silent)
        extra = ["--timeout", "1"]
    else:
        url = server.url
        extra = {"unknown model": ["--model", "gpt-9"], "http error": ["--prompt-tokens", "400"],
                 "bad numbers": ["--requests", "0"]}[kind]
    args = ["measure", "--url", url, "--prompt-tokens", "8", "--max-new-tokens", "2", *extra]
    try:
        assert main(args) == 2  # a repeated --prompt-tokens: the last one counts
    finally:
        if srv is not None:
            srv.shutdown()
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_urls_are_parsed_strictly():
    assert parse_url("http://Example.org:8000/v1").url == "http://example.org:8000"
    assert parse_url("https://h/proxy/v1/").prefix == "/proxy"
    for bad in ("http://user:pw@h:1", "h:8000", "http://h:1?x=1", ""):
        with pytest.raises(EngineError, match="URL"):
            parse_url(bad)
