"""The room's serving engine as an EngineClient: a Run submitted to `engine serve` arrives as events and a server Trace;
cancel and an unreachable server end it in one line; the local replay keeps the server's timings."""
import pytest

from engine.core.sampling_params import SamplingParams
from engine.serving.scheduling.work import Done, Failed, ModelSpec, Request, Started, drain
from tests import ROOT
from tests.serving_helpers import InProcessServer
from ui.engine_link import remote_engine, remote_measure, server_measurement

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


def test_a_run_sent_to_the_server_arrives_as_events_and_a_server_trace(allowed):
    work = Request(model=LOCAL, prompt_ids=list(range(3, 11)), max_new_tokens=5, params=SamplingParams(), prompt_text="x")
    remote_engine.RemoteEngine(allowed).submit(work)
    events = list(drain(work, timeout=120))
    assert isinstance(events[-1], Done) and any(isinstance(e, Started) for e in events)
    trace = events[-1].result
    assert trace.source == "server" and trace.n_prompt == 8 and trace.prompt_ids == list(range(3, 11))
    assert trace.settings["replay_spec"] == ["tiny-llama", "cpu", "float32", "fast"] and trace.queue_seconds >= 0


def test_a_cancelled_remote_run_fails_as_cancelled(allowed):
    work = Request(model=LOCAL, prompt_ids=[5, 6, 7], max_new_tokens=4)
    work.cancel()  # before the child even answers
    remote_engine.RemoteEngine(allowed).submit(work)
    final = list(drain(work, timeout=120))[-1]
    assert isinstance(final, Failed) and final.cancelled


def test_an_unreachable_server_fails_the_run_in_one_line(monkeypatch):
    monkeypatch.setenv(server_measurement.ENV, "127.0.0.1:9")
    work = Request(model=LOCAL, prompt_ids=[5, 6, 7], max_new_tokens=4)
    remote_engine.RemoteEngine("http://127.0.0.1:9").submit(work)
    final = list(drain(work, timeout=120))[-1]
    assert isinstance(final, Failed) and not final.cancelled and "cannot connect" in final.message


def _dashboard(*args: str, hosts: str | None = None):
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in (server_measurement.ENV, remote_measure.ENV)}
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
