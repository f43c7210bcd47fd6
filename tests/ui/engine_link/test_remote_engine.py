"""The room's serving engine: allow-list, model matching, one Run measured in a child process against `engine serve`."""
import pytest

from engine.core.sampling_params import SamplingParams
from engine.errors import EngineError
from engine.serving.scheduling.work import Done, Failed, ModelSpec, Request, Started, drain
from tests import ROOT
from tests.serving_helpers import InProcessServer
from ui.engine_link import remote_engine, server_measurement

LOCAL = ModelSpec("tiny-llama", "cpu", "float32")


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
    assert remote_engine.engine_url({}) is None


def test_an_engine_url_off_the_allow_list_is_refused_in_one_clear_line():
    with pytest.raises(EngineError, match="is refused: .*off on this dashboard.*--measure-hosts"):
        remote_engine.engine_url({remote_engine.ENV: "http://gpu-box:8000"})
    env = {remote_engine.ENV: "http://gpu-box:8000", server_measurement.ENV: "other-box"}
    with pytest.raises(EngineError, match="gpu-box:8000 is not on this dashboard's list"):
        remote_engine.engine_url(env)
    env[server_measurement.ENV] = "gpu-box"
    assert remote_engine.engine_url(env) == "http://gpu-box:8000"


@pytest.mark.parametrize("remote, local, same", [
    ("smollm2-135m-instruct", "smollm2-135m", True), ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m", True),
    ("openai-community/gpt2", "gpt2", True), ("tiny-llama", "tiny-llama", True), ("gpt2", "smollm2-135m", False),
    ("meta-llama/Llama-3.1-8B", "smollm2-135m", False)])
def test_the_same_model_under_either_sides_name(remote, local, same):
    assert remote_engine.same_model(remote, local) is same


def test_the_cli_check_refuses_an_unlisted_url(monkeypatch, capsys):
    monkeypatch.delenv(server_measurement.ENV, raising=False)
    assert remote_engine.main(["--url", "http://10.0.0.9:8000", "--check"]) == 2
    assert capsys.readouterr().err.startswith("error: the room's engine URL http://10.0.0.9:8000 is refused")


def test_one_request_sends_the_prompts_ids_to_the_same_model(allowed):
    ids = list(range(5, 17))
    rec = remote_engine.measure_one(allowed, "tiny-llama", ids, "", 6, {"temperature": 0.0, "seed": 0})
    assert rec["same_model"] and rec["model"] == "tiny-llama" and rec["tokenizer"] == "ours"
    assert rec["prompt_tokens"] == 12 and rec["prompt_ids"] == ids  # the server counted exactly our ids
    assert rec["output_tokens"] == len(rec["output_ids"]) == len(rec["steps"]) + 1 <= 6
    assert rec["server_metrics"]["scope"] == "request" and "queue" in rec["server_metrics"]


def test_another_model_gets_the_text_and_no_replay(allowed):
    rec = remote_engine.measure_one(allowed, "gpt2", [1, 2, 3], "Once upon a time", 4, {"temperature": 0.0})
    assert not rec["same_model"] and rec["prompt_ids"] == [] and rec["prompt_text"] == "Once upon a time"
    trace = remote_engine.to_trace(rec, ["gpt2", "cpu", "float32", "fast"])
    assert trace.settings["replay_spec"] is None and trace.settings["remote_model"] == "tiny-llama"


def test_a_run_sent_to_the_server_arrives_as_events_and_a_server_trace(allowed):
    work = Request(model=LOCAL, prompt_ids=list(range(3, 11)), max_new_tokens=5, params=SamplingParams(), prompt_text="x")
    remote_engine.submit(work, allowed, LOCAL)
    events = list(drain(work, timeout=120))
    assert isinstance(events[-1], Done) and any(isinstance(e, Started) for e in events)
    trace = events[-1].result
    assert trace.source == "server" and trace.n_prompt == 8 and trace.prompt_ids == list(range(3, 11))
    assert trace.settings["replay_spec"] == ["tiny-llama", "cpu", "float32", "fast"] and trace.queue_seconds >= 0


def test_a_cancelled_remote_run_fails_as_cancelled(allowed):
    work = Request(model=LOCAL, prompt_ids=[5, 6, 7], max_new_tokens=4)
    work.cancel()  # before the child even answers
    remote_engine.submit(work, allowed, LOCAL)
    final = list(drain(work, timeout=120))[-1]
    assert isinstance(final, Failed) and final.cancelled


def test_an_unreachable_server_fails_the_run_in_one_line(monkeypatch):
    monkeypatch.setenv(server_measurement.ENV, "127.0.0.1:9")
    work = Request(model=LOCAL, prompt_ids=[5, 6, 7], max_new_tokens=4)
    remote_engine.submit(work, "http://127.0.0.1:9", LOCAL)
    final = list(drain(work, timeout=120))[-1]
    assert isinstance(final, Failed) and not final.cancelled and "cannot connect" in final.message


def _dashboard(*args: str, hosts: str | None = None):
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in (server_measurement.ENV, remote_engine.ENV)}
    env.update({server_measurement.ENV: hosts} if hosts else {})
    return subprocess.run(["bash", "scripts/dashboard.sh", *args, "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_dashboard_sh_refuses_an_engine_url_off_the_allow_list():
    done = _dashboard("--room", "--engine-url", "http://gpu-box:8000")
    assert done.returncode == 2 and "the room's engine URL http://gpu-box:8000 is refused" in done.stderr
    done = _dashboard("--room", "--measure-hosts", "gpu-box", "--engine-url", "http://gpu-box:8000/v1")
    assert done.returncode == 0 and "every Run goes to the serving engine at http://gpu-box:8000" in done.stdout


def test_a_replay_keeps_the_servers_timings_and_takes_the_local_insides(tiny_llama):
    import engine

    local = engine.generate(tiny_llama, [5, 6, 7, 8], max_new_tokens=4, capture_attention=True)
    rec = {"source": "server", "url": "http://gpu:8000", "model": "tiny-llama", "prompt_tokens": 4, "output_tokens": 4,
           "prefill_seconds": 0.5, "steps": [{"seconds": 0.1}, {"seconds": 0.2}, {"seconds": 0.3}],
           "prompt_ids": [5, 6, 7, 8], "output_ids": local.output_ids[:2] + [-7, -8], "local_model": "tiny-llama",
           "same_model": True, "server_metrics": {"scope": "request", "queue": {"mean_seconds": 0.25}}}
    server = remote_engine.to_trace(rec, ["tiny-llama", "cpu", "float32", "fast"])
    both = remote_engine.with_local_insides(server, local)
    assert both.prefill_seconds == 0.5 and [s.seconds for s in both.steps] == [0.1, 0.2, 0.3]
    assert [s.kv_length for s in both.steps] == [s.kv_length for s in local.steps] and both.queue_seconds == 0.25
    assert both.model_config is not None and both.attention is not None and both.device == "server gpu:8000"
    assert both.settings["replayed_locally"]["tokens_agree"] == 2
    assert "first 2 of 4 output tokens are the server's" in server_measurement.replay_caption(both)
