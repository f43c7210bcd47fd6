"""AppTest: a room whose Runs go to a serving engine (--engine-url, here `engine serve` in this process, tiny model):
Home and Timing draw those runs, Prefill and Decode replay them on the local engine on demand, and say so."""
import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT, navigation_only
from tests.serving_helpers import InProcessServer
from ui import state
from ui.engine_link import remote_measure, server_measurement
from ui.room import config

APP = str(ROOT / "app.py")



@pytest.fixture(scope="module")
def served():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


def student(monkeypatch, url: str, hosts: str = "127.0.0.1") -> AppTest:
    """A student's session admitted to a room whose engine is `url`."""
    navigation_only(monkeypatch)
    for name, value in ((config.ENV_ROOM, "1"), (config.ENV_JOIN, "ROOM42"), (config.ENV_TEACHER, "TEACH9"),
                        (remote_measure.ENV, url), (server_measurement.ENV, hosts)):
        monkeypatch.setenv(name, value)
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state[state.MODEL] = "tiny-llama"
    at.session_state[state.ROOM_ROLE] = "student"
    at.session_state[state.PROMPT_TOKENS] = 16
    at.session_state[state.MAX_NEW_TOKENS] = 6
    return at.run()


def run(at: AppTest) -> AppTest:
    return at.sidebar.button(key=state.RUN).click().run()


def test_a_run_goes_to_the_rooms_server_and_every_page_draws_it(monkeypatch, served):
    before = served.service.status()["finished"]
    at = run(student(monkeypatch, served.url))
    assert not at.exception and not at.error
    trace = at.session_state[state.STORE].last_trace
    assert trace.source == "server" and trace.settings["url"] == served.url and trace.n_prompt == 16
    assert trace.model_config is None and trace.settings["replay_spec"][0] == "tiny-llama"
    assert served.service.status()["finished"] == before + 1  # the server ran it
    at.switch_page("pages/story/timing.py").run()
    assert not at.exception and any("Measured from outside" in c.value for c in at.caption)

    at.switch_page("pages/story/prefill.py").run()  # the insides: offered, not yet computed
    assert not at.exception and any("replay the same 16 prompt tokens, untimed" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.button(key=state.REMOTE_REPLAY_RUN).click().run()
    assert not at.exception and not at.error
    assert any("replayed untimed on this dashboard's engine" in c.value for c in at.caption)
    ttft = next(m.value for m in at.metric if m.label.startswith("Prefill time"))
    assert ttft == f"{trace.prefill_seconds * 1000:.1f} ms"  # the server's TTFT, not the replay's
    assert at.get("plotly_chart")  # the attention matrix

    at.switch_page("pages/story/decode.py").run()  # the same replay serves the Decode page
    assert not at.exception and not at.error and at.get("plotly_chart")
    assert not [b for b in at.button if b.key == state.REMOTE_REPLAY_RUN]


def test_another_model_on_the_server_gets_no_attention_view(monkeypatch):
    other = InProcessServer("tiny-gpt2")
    try:
        at = run(student(monkeypatch, other.url))
        assert not at.exception and not at.error
        assert at.session_state[state.STORE].last_trace.settings["same_model"] is False
        at.switch_page("pages/story/prefill.py").run()
        assert any("runs `tiny-gpt2` and this dashboard's engine `tiny-llama`" in i.value for i in at.info)
        assert not [b for b in at.button if b.key == state.REMOTE_REPLAY_RUN]
    finally:
        other.close()


def test_an_engine_url_off_the_allow_list_refuses_every_run(monkeypatch, served):
    at = run(student(monkeypatch, served.url, hosts="gpu-box"))
    assert at.session_state[state.STORE].last_trace is None
    assert any("Cannot run: the room's engine URL" in e.value and "--measure-hosts" in e.value for e in at.error)
