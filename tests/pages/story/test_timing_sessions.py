"""AppTest: with more than one run the Timing page offers the handout (all runs side by side) and the sidebar saves
the whole session; with one run neither handout nor a one-run 'session' is pushed at the student."""
import pytest
from streamlit.testing.v1 import AppTest

import engine
from tests import ROOT, navigation_only
from ui import state
from ui.engine_link.run_store import RunStore

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def traces(tiny_llama):
    return [engine.generate(tiny_llama, "The valley and the bridge " * n, n + 2, ignore_eos=True) for n in (2, 5)]


def _downloads(at: AppTest) -> list[str]:
    return [e.proto.label for e in at.get("download_button")]


def _timing_with(monkeypatch, history) -> AppTest:
    navigation_only(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    store = RunStore()
    for trace in history:
        store.keep(trace)
    at.session_state[state.STORE] = store
    at.run()
    return at.switch_page("pages/story/timing.py").run()


def test_two_runs_offer_the_handout_and_the_session_file(monkeypatch, traces):
    at = _timing_with(monkeypatch, traces)
    assert not at.exception
    labels = _downloads(at)
    assert "Download the handout: 2 runs side by side (HTML)" in labels
    assert "Save the whole session (2 runs)" in labels


def test_one_run_offers_no_handout(monkeypatch, traces):
    at = _timing_with(monkeypatch, traces[:1])
    assert not at.exception
    labels = _downloads(at)
    assert not any("handout" in label for label in labels) and "Save the whole session (1 run)" in labels
