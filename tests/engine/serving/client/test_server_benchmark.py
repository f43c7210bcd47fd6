"""engine/serving/client/server_benchmark.py against a server that refuses vLLM's extensions (ignore_eos,
return_token_ids): the run falls back without them even with no warm-up, and every record says what was asked."""
import pytest

from engine.errors import EngineError
from engine.serving.client.openai_client import Client
from engine.serving.client.server_benchmark import Plan, run, trace_from_record
from tests.serving_helpers import InProcessServer


@pytest.fixture(scope="module")
def server():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


@pytest.fixture
def refusing(monkeypatch):
    """Our server, made to answer like OpenAI's API to vLLM's extensions: a 400 naming the field."""
    real = Client.stream_completion
    refused = []

    def stream_completion(self, body):
        if "ignore_eos" in body or "return_token_ids" in body:
            refused.append(body)
            raise EngineError(f"{self.target.url}/v1/completions answered HTTP 400: Unrecognized request argument "
                              "supplied: ignore_eos")
        return real(self, body)

    monkeypatch.setattr(Client, "stream_completion", stream_completion)
    return refused


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_refused_ignore_eos_is_dropped_and_recorded_as_dropped(server, refusing, warmup):
    records, facts = run(Plan(server.url, prompt_tokens=12, max_new_tokens=3, requests=2, warmup=warmup))
    assert len(refusing) == 1  # asked once with the extensions, never again
    assert facts["ignore_eos"] is False
    assert [trace_from_record(r).settings["ignore_eos"] for r in records] == [False, False]  # what the page shows
    assert [r["ignore_eos"] for r in records] == [False, False]


def test_concurrent_requests_fall_back_too(server, refusing):
    records, facts = run(Plan(server.url, prompt_tokens=12, max_new_tokens=3, requests=4, concurrency=2, warmup=0))
    assert facts["ignore_eos"] is False and len(records) == 4
    assert all(r["ignore_eos"] is False and r["output_tokens"] >= 1 for r in records)


def test_with_the_extensions_accepted_records_say_ignore_eos(server):
    records, facts = run(Plan(server.url, prompt_tokens=12, max_new_tokens=3, requests=1, warmup=0))
    assert facts["ignore_eos"] is True and records[0]["ignore_eos"] is True
    assert trace_from_record(records[0]).settings["ignore_eos"] is True


def test_other_errors_are_not_mistaken_for_a_refusal(server, monkeypatch):
    def broken(self, body):
        raise EngineError(f"{self.target.url}/v1/completions answered HTTP 500: internal error")

    monkeypatch.setattr(Client, "stream_completion", broken)
    with pytest.raises(EngineError, match="HTTP 500"):
        run(Plan(server.url, prompt_tokens=12, max_new_tokens=3, warmup=0))
