"""Recorded runs in the dashboard: every shipped trace replays on every page with no model, uploads are checked."""
import dataclasses
import json
import math

import pytest
from streamlit.testing.v1 import AppTest

import engine
from engine.core import trace_file
from engine.core.trace import SCHEMA_VERSION
from tests import ROOT, navigation_only
from ui import state
from ui.demo import recorded

APP = str(ROOT / "app.py")
STORY = ["pages/story/home.py", "pages/story/prefill.py", "pages/story/decode.py", "pages/story/timing.py"]
SHIPPED = [s.name for s in recorded.shipped()]



@pytest.fixture
def replay(monkeypatch):
    """AppTests of the replay-only dashboard; starting the engine worker (loading a model) fails the test."""
    monkeypatch.setenv("TWO_BENDS_REPLAY", "1")
    navigation_only(monkeypatch)

    def no_worker(*args, **kwargs):
        raise AssertionError("replay mode started the engine worker")

    monkeypatch.setattr("ui.engine_link.server_link.ServerLink.__init__", no_worker)

    def make(query: dict | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update(query or {})
        return at

    return make


def test_at_least_three_labelled_traces_ship_and_each_stays_small():
    assert len(SHIPPED) >= 3, SHIPPED
    riders = []
    for item in recorded.shipped():
        assert item.path.stat().st_size < 6 * 2**20, item.name
        trace = recorded.load_shipped(item.name)
        rec = trace.settings["recording"]
        assert rec["title"] and rec["date"] and rec["machine"], item.name
        assert trace.model.startswith("SmolLM2") and trace.device == "cpu" and trace.dtype == "float32"
        assert trace.schema_version == SCHEMA_VERSION and trace.attention is not None
        riders.append(max((s.riders for s in trace.steps), default=1))
    assert max(riders) > 1  # one of them is a batch (class-server) run


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_trace_replays_on_every_story_page(replay, name):
    at = replay({"trace": name}).run()
    trace = at.session_state[state.STORE].last_trace
    assert trace is recorded.load_shipped(name)
    for page in STORY:
        at.switch_page(page).run()
        assert not at.exception, (name, page, at.exception)
        assert at.get("plotly_chart"), (name, page)
        assert any("Recorded run" in c.value for c in at.caption), (name, page)
    at.switch_page("pages/story/decode.py").run()
    for _ in range(3):
        at.button(key=state.DECODE_NEXT).click().run()
    assert at.session_state[state.DECODE_POSITION] == 3 and not at.exception
    layers = at.selectbox(key=state.DECODE_LAYER).options
    assert [int(layer.split()[-1]) for layer in layers] == sorted(trace.attention.layers)  # no model for others


def test_replay_mode_has_no_labs_and_no_run_button(replay):
    at = replay().run()
    assert not at.exception
    assert not [b for b in at.sidebar.button if b.key == state.RUN]
    assert at.session_state[state.STORE].last_trace is not None  # a recorded run is shown at once
    assert any("Replay mode" in m.value for m in at.sidebar.markdown)
    with pytest.raises(ValueError, match="Could not find a navigation page"):  # labs are not in the navigation
        at.switch_page("pages/labs/lab_sweeps.py")


@pytest.mark.parametrize("page", STORY)
def test_presenter_mode_draws_every_story_page(replay, page):
    at = replay({"trace": SHIPPED[0], "present": "1"}).run()
    at.switch_page(page).run()
    assert not at.exception
    assert at.button(key=state.PRESENTER_LEAVE)  # the way back, since the sidebar is hidden
    assert at.get("plotly_chart")
    at.button(key=state.PRESENTER_LEAVE).click().run()
    assert not at.exception and at.session_state[state.PRESENTER] is False


def test_presenter_prefill_steps_through_rows(replay):
    at = replay({"trace": SHIPPED[0], "present": "1", "page": "prefill"}).run()
    assert not at.exception
    first = at.get("plotly_chart")[0].proto.spec
    at.button(key=state.PREFILL_NEXT).click().run()
    assert at.session_state[state.PREFILL_POSITION] == 1
    assert at.get("plotly_chart")[0].proto.spec != first and "Decode step 1" in at.get("plotly_chart")[0].proto.spec


@pytest.fixture(scope="module")
def good_bytes(tiny_llama) -> bytes:
    trace = engine.generate(tiny_llama, "The valley and the bridge", 5, capture_attention=True, ignore_eos=True)
    return trace_file.trace_bytes(trace, "uploaded run")


def _bad_files(good: dict) -> dict:
    steps = good["steps"]
    return {
        "empty": (b"", "is empty"),
        "not JSON": (b"<html>hello</html>", "is not a JSON file"),
        "truncated": (json.dumps(good).encode()[:700], "is truncated"),
        "a JSON list": (b"[]", "a JSON list, not a trace object"),
        "another schema": (b'{"rows": [1, 2]}', "not a Two Bends trace"),
        "wrong types": (json.dumps(dict(good, output_ids="many")).encode(), "'output_ids' must be a list"),
        "negative timing": (json.dumps(dict(good, steps=[dict(steps[0], seconds=-2.0)] + steps[1:])).encode(),
                            "'steps[0].seconds' must be a finite"),
        "NaN timing": (json.dumps(dict(good, prefill_seconds=math.nan)).encode(), "'prefill_seconds' must be a finite"),
        "future schema": (json.dumps(dict(good, schema_version=SCHEMA_VERSION + 5)).encode(), "newer Two Bends"),
        "over 50 MB": (b" " * (trace_file.MAX_FILE_BYTES + 1), "at most 50 MB"),
    }


def test_every_bad_upload_is_refused_with_its_message_and_changes_nothing(replay, good_bytes):
    at = replay({"trace": SHIPPED[0]}).run()
    shown = at.session_state[state.STORE].last_trace
    for case, (data, expected) in _bad_files(json.loads(good_bytes)).items():
        at.sidebar.file_uploader(key=state.TRACE_UPLOAD).set_value((f"{case}.json", data, "application/json")).run()
        assert not at.exception, case
        errors = [e.value for e in at.sidebar.error]
        assert len(errors) == 1 and expected in errors[0].replace("\\", ""), (case, errors)
        assert at.session_state[state.STORE].last_trace is shown, case  # nothing else happened
    at.sidebar.file_uploader(key=state.TRACE_UPLOAD).set_value(("mine.json", good_bytes, "application/json")).run()
    assert not at.exception and not at.sidebar.error
    assert at.session_state[state.STORE].last_trace.settings["recording"]["title"] == "uploaded run"


def test_text_inside_an_uploaded_trace_is_shown_as_text(replay, tiny_llama, good_bytes):
    trace = trace_file.read_trace(good_bytes)
    hostile = dataclasses.replace(trace, text="<img src=x onerror=alert(1)> **bold** [link](http://x)",
                                  prompt_text="<script>alert('p')</script>")
    at = replay().run()
    at.sidebar.file_uploader(key=state.TRACE_UPLOAD).set_value(
        ("hostile.json", trace_file.trace_bytes(hostile), "application/json")).run()
    assert not at.exception
    texts = [t.value for t in at.text]
    assert hostile.text in texts and hostile.prompt_text in texts  # st.text: verbatim, never Markdown or HTML
    assert not any("<img" in m.value or "<script" in m.value for m in at.markdown)


def test_a_server_measured_recording_opens_on_every_story_page(replay):
    trace = engine.Trace(model="smollm2-135m-instruct", device="server 127.0.0.1:8000/v1", dtype="as served",
                         prompt_ids=[-1] * 12, output_ids=[-1] * 4, text="Hello", prefill_seconds=0.05,
                         steps=[engine.DecodeStep(0.01, 12 + k, 0) for k in range(1, 4)],
                         env={"device_name": "a server at http://127.0.0.1:8000/v1"}, source="server")
    at = replay().run()
    at.sidebar.file_uploader(key=state.TRACE_UPLOAD).set_value(
        ("server.json", trace_file.trace_bytes(trace), "application/json")).run()
    assert at.session_state[state.STORE].last_trace.source == "server"
    for page in STORY:
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
    at.switch_page("pages/story/decode.py").run()
    assert any("measured from outside, on a server" in i.value for i in at.info)  # Decode says what it cannot draw
