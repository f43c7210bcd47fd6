"""The child process that measures one Run on the room's serving engine: the allow-list, and one request timed from
outside against `engine serve` (ids to the same model, text to another)."""
import pytest

from engine.errors import EngineError
from tests.serving_helpers import InProcessServer
from ui.engine_link import remote_engine, remote_measure, server_measurement


@pytest.fixture(scope="module")
def server():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


@pytest.fixture
def allowed(server, monkeypatch):
    monkeypatch.setenv(server_measurement.ENV, "127.0.0.1")
    return server.url


def test_no_engine_url_means_local_runs():
    assert remote_measure.engine_url({}) is None


def test_an_engine_url_off_the_allow_list_is_refused_in_one_clear_line():
    with pytest.raises(EngineError, match="is refused: .*off on this dashboard.*--measure-hosts"):
        remote_measure.engine_url({remote_measure.ENV: "http://gpu-box:8000"})
    env = {remote_measure.ENV: "http://gpu-box:8000", server_measurement.ENV: "other-box"}
    with pytest.raises(EngineError, match="gpu-box:8000 is not on this dashboard's list"):
        remote_measure.engine_url(env)
    env[server_measurement.ENV] = "gpu-box"
    assert remote_measure.engine_url(env) == "http://gpu-box:8000"


def test_the_cli_check_refuses_an_unlisted_url(monkeypatch, capsys):
    monkeypatch.delenv(server_measurement.ENV, raising=False)
    assert remote_measure.main(["--url", "http://10.0.0.9:8000", "--check"]) == 2
    assert capsys.readouterr().err.startswith("error: the room's engine URL http://10.0.0.9:8000 is refused")


def test_one_request_sends_the_prompts_ids_to_the_same_model(allowed):
    ids = list(range(5, 17))
    rec = remote_measure.measure_one(allowed, "tiny-llama", ids, "", 6, {"temperature": 0.0, "seed": 0})
    assert rec["same_model"] and rec["model"] == "tiny-llama" and rec["tokenizer"] == "ours"
    assert rec["prompt_tokens"] == 12 and rec["prompt_ids"] == ids  # the server counted exactly our ids
    assert rec["output_tokens"] == len(rec["output_ids"]) == len(rec["steps"]) + 1 <= 6
    assert rec["server_metrics"]["scope"] == "request" and "queue" in rec["server_metrics"]


def test_another_model_gets_the_text_and_no_replay(allowed):
    rec = remote_measure.measure_one(allowed, "gpt2", [1, 2, 3], "Once upon a time", 4, {"temperature": 0.0})
    assert not rec["same_model"] and rec["prompt_ids"] == [] and rec["prompt_text"] == "Once upon a time"
    trace = remote_engine.to_trace(rec, ["gpt2", "cpu", "float32", "fast"])
    assert trace.settings["replay_spec"] is None and trace.settings["remote_model"] == "tiny-llama"
