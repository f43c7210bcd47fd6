"""`engine serve --api-key`: the official openai client gets 401 without the key and answers with it; /health,
/metrics, /version and the API's description stay open (vLLM guards only /v1); a warning when it listens beyond
this machine with no key; `measure --api-key`."""
import json
import subprocess
import sys

import openai
import pytest

from engine.serving.api_server.openai_server import authorised, create_app, prepare
from engine.serving.scheduling.work import ModelSpec
from engine.serving.scheduling.worker import LocalService, ServiceOptions
from tests import ROOT
from tests.serving_helpers import BackgroundServer, CliServer, free_port, metrics_of, post

KEY = "sk-room-7f3a"


@pytest.fixture(scope="module")
def server():
    spec = ModelSpec("tiny-llama", "cpu", "float32")
    service = LocalService(ServiceOptions(preload=spec))
    http = BackgroundServer(create_app(service, prepare(service, spec, "tiny-llama", 4096), api_key=KEY), api_key=KEY)
    yield http.url
    http.stop()
    service.close()


def client(url, key):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def test_without_the_key_the_openai_client_gets_401_json(server):
    with pytest.raises(openai.AuthenticationError) as err:
        client(server, "wrong").completions.create(model="tiny-llama", prompt="hi", max_tokens=2)
    assert err.value.status_code == 401 and err.value.code == "invalid_api_key"
    status, headers, body = post(server, "/v1/chat/completions", {"model": "tiny-llama", "messages": []})
    assert status == 401 and headers.get("www-authenticate") == "Bearer"
    assert "Authorization: Bearer" in body["error"]["message"] and body["error"]["type"] == "invalid_request_error"
    assert post(server, "/v1/models", None, method="GET")[0] == 401
    assert post(server, "/tokenize", {"prompt": "hi"})[0] == 401  # the tokenizer is the model's too


def test_with_the_key_it_answers(server):
    out = client(server, KEY).completions.create(model="tiny-llama", prompt="Two bends", max_tokens=3, temperature=0,
                                                 extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 3
    assert [m.id for m in client(server, KEY).models.list().data] == ["tiny-llama"]


def test_health_metrics_version_and_the_description_stay_open(server):
    assert post(server, "/health", None, method="GET")[0] == 200
    assert "vllm:num_requests_running" in metrics_of(server)
    assert post(server, "/version", None, method="GET")[0] == 200
    status, _, schema = post(server, "/openapi.json", None, method="GET")
    assert status == 200 and schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    completions = schema["paths"]["/v1/completions"]["post"]
    assert completions["security"] == [{"bearer": []}] and "401" in completions["responses"]
    assert "security" not in schema["paths"]["/health"]["get"]


def test_the_bearer_check():
    assert authorised(f"Bearer {KEY}", KEY) and authorised(f"bearer  {KEY} ", KEY)
    assert not authorised(None, KEY) and not authorised(KEY, KEY) and not authorised(f"Basic {KEY}", KEY)
    assert not authorised(f"Bearer {KEY}x", KEY) and not authorised("Bearer ", KEY)


def test_cli_key_from_the_environment_and_measure_sends_it(monkeypatch):
    monkeypatch.setenv("TWO_BENDS_API_KEY", KEY)
    srv = CliServer("--model", "tiny-llama", "--device", "cpu", "--host", "0.0.0.0", port=free_port())
    try:
        assert not any("warning" in line for line in srv.lines)  # a key: listening widely is the operator's choice
        assert "clients must send the API key" in srv.lines[-1]
        assert post(srv.url, "/v1/completions", {"model": "tiny-llama", "prompt": "hi"})[0] == 401
        measure = [sys.executable, "-m", "engine", "measure", "--url", srv.url, "--prompt-tokens", "8",
                   "--max-new-tokens", "4", "--json", "--warmup", "0"]
        monkeypatch.delenv("TWO_BENDS_API_KEY")
        refused = subprocess.run(measure, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and "API key" in refused.stderr and "Traceback" not in refused.stderr
        done = subprocess.run(measure + ["--api-key", KEY], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1])["output_tokens"] == 4
    finally:
        srv.close()


def test_cli_warns_at_start_when_it_listens_widely_with_no_key(monkeypatch):
    monkeypatch.delenv("TWO_BENDS_API_KEY", raising=False)
    out = subprocess.run([sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", str(free_port()),
                          "--model", "no-such-model-here", "--device", "cpu"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0  # the model does not exist: the warning came before any loading
    assert "warning: listening on 0.0.0.0 with no API key" in out.stdout and "--api-key" in out.stdout
