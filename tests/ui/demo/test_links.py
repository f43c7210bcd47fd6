"""Shareable links: query parameters checked value by value, defaults left out, and a round trip through the app."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from tests import ROOT, navigation_only
from ui import state
from ui.controls import widgets
from ui.demo import links
from ui.text import prompts

APP = str(ROOT / "app.py")
PAGES = {"home", "prefill", "decode", "timing"}
TRACES = {"long-prompt-short-answer"}



def test_parse_reads_every_setting():
    link = links.parse({"page": "decode", "example": "chat", "prompt_tokens": "128", "output_tokens": "200",
                        "temperature": "0.7", "top_k": "40", "top_p": "0.9", "seed": "7", "chat": "1", "fit": "0",
                        "present": "1", "trace": "long-prompt-short-answer", "embed": "true"}, PAGES, TRACES)
    assert not link.notices and link.notice() == ""
    assert link.page == "decode" and link.trace == "long-prompt-short-answer"
    assert link.values == {state.EXAMPLE: "chat", state.PROMPT_TOKENS: 128, state.MAX_NEW_TOKENS: 200,
                           state.TEMPERATURE: 0.7, state.TOP_K: 40, state.TOP_P: 0.9, state.SEED: 7, state.CHAT: True,
                           state.FIT_PROMPT: False, state.PRESENTER: True}


@pytest.mark.parametrize("name,raw", [
    ("prompt_tokens", "0"), ("prompt_tokens", "5000"), ("prompt_tokens", "12.5"), ("prompt_tokens", "-3"),
    ("output_tokens", "lots"), ("temperature", "nan"), ("temperature", "inf"), ("temperature", "2.5"),
    ("top_p", "0"), ("top_k", "1e3"), ("seed", "99999999999"), ("chat", "maybe"), ("present", ""),
    ("example", "poetry"), ("example", "<script>"), ("page", "admin"), ("trace", "../../etc/passwd"),
])
def test_bad_values_fall_back_with_a_notice(name, raw):
    good_name, good_key = ("top_k", state.TOP_K) if name != "top_k" else ("seed", state.SEED)
    link = links.parse({name: raw, good_name: "3"}, PAGES, TRACES)
    assert link.values == {good_key: 3}  # the good value is kept, the bad one dropped
    assert link.page is None and link.trace is None
    notice = link.notice()
    assert notice.startswith("Some settings in this link could not be used") and name in notice
    assert "<" not in notice and "/" not in notice.split(":", 1)[1]  # the refused value is quoted harmlessly


def test_floats_snap_to_the_slider_step():
    assert links.parse({"temperature": "0.33"}, PAGES, TRACES).values[state.TEMPERATURE] == 0.35
    assert links.parse({"top_p": "0.951"}, PAGES, TRACES).values[state.TOP_P] == 0.95


def test_build_leaves_defaults_out_and_round_trips():
    defaults = {p.key: p.default for p in links.PARAMS.values()}
    assert links.build(defaults, "home") == {"page": "home"}
    values = dict(defaults, **{state.TEMPERATURE: 0.7, state.PROMPT_TOKENS: 256, state.PRESENTER: True, state.FIT_PROMPT: False})
    query = links.build(values, "timing", "long-prompt-short-answer")
    assert query == {"page": "timing", "prompt_tokens": "256", "fit": "0", "temperature": "0.7", "present": "1",
                     "trace": "long-prompt-short-answer"}
    back = links.parse(query, PAGES, TRACES)
    assert {k: back.values.get(k, d) for k, d in defaults.items()} == values and back.page == "timing"


def test_link_ranges_are_the_sidebar_ranges():
    assert links.PARAMS["prompt_tokens"].high == prompts.PROMPT_TOKENS_MAX
    assert links.PARAMS["output_tokens"].high == prompts.OUTPUT_TOKENS_MAX
    assert links.PARAMS["prompt_tokens"].default == widgets.DEFAULT_PROMPT_TOKENS
    assert links.PARAMS["output_tokens"].default == widgets.DEFAULT_OUTPUT_TOKENS
    assert links.PARAMS["example"].default == widgets.DEFAULT_EXAMPLE


@pytest.fixture
def app_test(monkeypatch):
    navigation_only(monkeypatch)

    def make(query: dict | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state[state.MODEL] = "tiny-llama"
        at.query_params.update(query or {})
        return at

    return make


def test_query_parameters_round_trip_through_the_app(app_test):
    at = app_test().run()
    assert not at.exception
    at.sidebar.selectbox(key=state.EXAMPLE).set_value("chat").run()
    at.sidebar.slider(key=state.PROMPT_TOKENS).set_value(96).run()
    at.sidebar.slider(key=state.MAX_NEW_TOKENS).set_value(48).run()
    at.sidebar.slider(key=state.TEMPERATURE).set_value(0.8).run()
    at.sidebar.number_input(key=state.SEED).set_value(11).run()
    at.sidebar.toggle(key=state.CHAT).set_value(True).run()
    at.switch_page("pages/story/timing.py").run()
    assert not at.exception
    query = dict(at.query_params)
    assert query == {"page": "timing", "example": "chat", "prompt_tokens": "96", "output_tokens": "48",
                     "temperature": "0.8", "seed": "11", "chat": "1"}

    opened = app_test(query).run()  # a classmate opens the link
    assert not opened.exception and not opened.warning
    ss = opened.session_state
    assert (ss[state.EXAMPLE], ss[state.PROMPT_TOKENS], ss[state.MAX_NEW_TOKENS], ss[state.TEMPERATURE], ss[state.SEED],
            ss[state.CHAT]) == ("chat", 96, 48, 0.8, 11, True)
    assert "tutor" in ss[state.PROMPT]  # the example's text, as picking it in the sidebar does
    assert any(t.value.startswith("The dispatcher") for t in opened.title)  # the page of the link
    assert dict(opened.query_params) == query


def test_a_bad_link_opens_the_defaults_with_a_short_notice(app_test):
    at = app_test({"prompt_tokens": "99999", "temperature": "hot", "page": "nowhere", "output_tokens": "16"}).run()
    assert not at.exception
    assert at.session_state[state.PROMPT_TOKENS] == widgets.DEFAULT_PROMPT_TOKENS
    assert at.session_state[state.TEMPERATURE] == 0.0 and at.session_state[state.MAX_NEW_TOKENS] == 16
    notice = " ".join(w.value for w in at.warning)
    assert "prompt_tokens" in notice and "temperature" in notice and "page" in notice
    at.run()
    assert not at.warning  # said once


# ----------------------------------------------------------------------------------------------
# run=1: a prepared link is a prepared slide (the run starts once per opening; never in replay-only mode)
# ----------------------------------------------------------------------------------------------
def test_run_is_read_like_the_other_flags():
    link = links.parse({"run": "1", "present": "1", "prompt_tokens": "16"}, PAGES, TRACES)
    assert link.run and not link.notices
    assert links.parse({"run": "0"}, PAGES, TRACES).run is False
    assert links.parse({}, PAGES, TRACES).run is False
    bad = links.parse({"run": "soon"}, PAGES, TRACES)
    assert not bad.run and "run 'soon' is not 1 or 0" in bad.notice()
    assert state.RUN not in bad.values  # an action, not a sidebar setting


def test_run_is_refused_in_replay_only_mode_with_the_reason():
    link = links.parse({"run": "1", "page": "decode"}, PAGES, TRACES, replay_only=True)
    assert not link.run and link.page == "decode"
    assert "replay" in link.notice() and "no model" in link.notice()


def test_run_with_a_recorded_trace_keeps_the_recording():
    link = links.parse({"run": "1", "trace": "long-prompt-short-answer"}, PAGES, TRACES)
    assert not link.run and link.trace == "long-prompt-short-answer"
    assert "recorded run" in link.notice()


def test_build_keeps_run_only_when_asked():
    assert "run" not in links.build({state.PRESENTER: True}, "decode")
    assert links.build({state.PRESENTER: True}, "decode", run=True) == {"page": "decode", "present": "1", "run": "1"}
    assert links.parse(links.build({}, "decode", run=True), PAGES, TRACES).run


def test_a_run_link_runs_once_on_opening(app_test):
    at = app_test({"page": "decode", "prompt_tokens": "16", "output_tokens": "8", "present": "1", "run": "1"}).run()
    assert not at.exception and not at.error
    store = at.session_state[state.STORE]
    first = store.last_trace
    assert first is not None and (first.n_prompt, first.n_output) == (16, 8)
    assert dict(at.query_params)["run"] == "1"  # the address bar still holds the prepared slide
    at.run()
    at.switch_page("pages/story/timing.py").run()
    assert not at.exception
    assert store.last_trace is first and len(store.history) == 1  # reruns and page switches do not run again


def test_a_run_link_in_replay_only_mode_says_why(app_test, monkeypatch):
    monkeypatch.setenv("TWO_BENDS_REPLAY", "1")
    at = app_test({"page": "decode", "present": "1", "run": "1"}).run()
    assert not at.exception
    notice = " ".join(w.value for w in at.warning)
    assert "run" in notice and "replay" in notice


def test_theme_dark_travels_in_the_link():
    link = links.parse({"theme": "dark"}, set(), set())
    assert link.values[state.DARK_THEME] is True and not link.notices
    assert links.parse({"theme": " Light "}, set(), set()).values[state.DARK_THEME] is False
    assert links.build({state.DARK_THEME: True})["theme"] == "dark"
    assert "theme" not in links.build({state.DARK_THEME: False})  # light is the default: left out
    refused = links.parse({"theme": "blue"}, set(), set())
    assert state.DARK_THEME not in refused.values and "theme 'blue' is not light or dark" in refused.notice()


# --- any link (hypothesis): parse never raises, keeps only in-range values, and what it kept survives build/parse ---
NAMES = sorted([*links.PARAMS, links.PAGE, links.TRACE, links.RUN])
raw_values = st.text(max_size=30) | st.sampled_from(["1", "0", "dark", "1e308", "nan", "-0", "0.05", "+7", "٣", "1_0",
                                                      " 64 ", "home", "long-prompt-short-answer", "chat", "2.0000001"])
queries = st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=8), raw_values, max_size=8)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(query=queries, replay_only=st.booleans())
def test_any_link_is_read_without_raising_and_what_it_keeps_round_trips(query, replay_only):
    got = links.parse(query, PAGES, TRACES, replay_only)
    for param in links.PARAMS.values():
        if param.key in got.values and param.kind in ("int", "float"):
            assert param.low <= got.values[param.key] <= param.high
    assert got.page in PAGES | {None} and got.trace in TRACES | {None}
    assert not (got.run and (replay_only or got.trace))
    assert "\n" not in got.notice() and all(len(n) < 300 for n in got.notices)
    again = links.parse(links.build(got.values, got.page, got.trace, got.run), PAGES, TRACES, replay_only)
    defaults = {p.key: p.default for p in links.PARAMS.values()}
    assert {k: again.values.get(k, d) for k, d in defaults.items()} == {k: got.values.get(k, d) for k, d in defaults.items()}
    assert (again.page, again.trace, again.run, again.notices) == (got.page, got.trace, got.run, [])


# ----------------------------------------------------------------------------------------------
# ignore_eos (exact output length), preset=..., lesson=...&step=...
# ----------------------------------------------------------------------------------------------
def test_ignore_eos_is_a_flag_on_by_default_like_the_sidebars():
    assert links.PARAMS["ignore_eos"].default is True and widgets.defaults()[state.IGNORE_EOS] is True
    assert links.parse({"ignore_eos": "0"}, PAGES, TRACES).values == {state.IGNORE_EOS: False}
    assert "ignore_eos" not in links.build({state.IGNORE_EOS: True})  # the default: left out
    assert links.build({state.IGNORE_EOS: False}) == {"ignore_eos": "0"}
    assert "ignore_eos 'often' is not 1 or 0" in links.parse({"ignore_eos": "often"}, PAGES, TRACES).notice()


def test_preset_is_pressed_once_and_refused_where_it_cannot_run():
    assert links.parse({"preset": "decode"}, PAGES, TRACES).preset == "decode"
    bad = links.parse({"preset": "fastest"}, PAGES, TRACES)
    assert bad.preset is None and "preset 'fastest' is not one of prefill, even, decode" in bad.notice()
    replay = links.parse({"preset": "decode"}, PAGES, TRACES, replay_only=True)
    assert replay.preset is None and "replay" in replay.notice()
    recording = links.parse({"preset": "decode", "trace": "long-prompt-short-answer"}, PAGES, TRACES)
    assert recording.preset is None and "recorded run" in recording.notice()
    assert links.build({}, "home", preset="decode") == {"page": "home", "preset": "decode"}


def test_lesson_and_step_name_a_loaded_lesson():
    lessons = {"45-minutes": 12}
    got = links.parse({"lesson": "45-minutes", "step": "3"}, PAGES, TRACES, lessons=lessons)
    assert (got.lesson, got.step, got.notices) == ("45-minutes", 3, [])
    assert links.parse({"lesson": "45-minutes"}, PAGES, TRACES, lessons=lessons).step == 1
    far = links.parse({"lesson": "45-minutes", "step": "13"}, PAGES, TRACES, lessons=lessons)
    assert far.step == 1 and "step '13' is not a step of the lesson 45-minutes (1 to 12)" in far.notice()
    unknown = links.parse({"lesson": "90-minutes"}, PAGES, TRACES, lessons=lessons)
    assert unknown.lesson is None and "lesson '90-minutes' is not one of the lessons" in unknown.notice()
    assert "45-minutes" in unknown.notice()  # the ones there are
    alone = links.parse({"step": "2"}, PAGES, TRACES, lessons=lessons)
    assert alone.step is None and "names no lesson" in alone.notice()
    assert links.build({}, "decode", lesson="45-minutes", step=4) == {"page": "decode", "lesson": "45-minutes",
                                                                       "step": "4"}
