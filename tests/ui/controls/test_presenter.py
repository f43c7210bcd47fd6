"""Presenter mode's own bar (AppTest): every page, the request's example and lengths, Run, the keys, the glossary;
and the empty state that says where Run is."""
import pytest

from ui import state
from ui.text import prompts

STORY = ["pages/story/home.py", "pages/story/prefill.py", "pages/story/decode.py", "pages/story/timing.py"]


def _bar(at):
    return at.main.get("flex_container")[0]  # the first block of the main area: presenter mode's bar


def _labels(block, kind: str) -> list[str]:
    found = []
    for child in getattr(block, "children", {}).values():
        if getattr(child, "type", None) == kind:
            found.append(child.label)
        found += _labels(child, kind)
    return found


def test_the_bar_reaches_every_page_grouped_as_in_the_app(make_app):
    at = make_app(presenter=True).run()
    assert not at.exception
    links = _labels(_bar(at), "page_link")
    assert links[:4] == ["Home", "Prefill", "Decode", "Timing"]
    for title in ("Sweep lab", "Batch lab", "Roofline & hardware", "Remedies lab", "Old Qin's budget",
                  "Where the time goes", "Measure a server"):
        assert title in links
    assert at.button(key=state.PRESENTER_RUN).label == "Run"
    assert any("→ ← space" in m.value for m in at.main.markdown)  # the keys, as a hint
    assert any("time to first token" in m.value for m in at.main.markdown)  # the glossary's popover


def test_the_bars_lengths_and_run_drive_the_request(make_app):
    at = make_app(presenter=True).run()
    at.number_input(key=state.PRESENTER_PROMPT_TOKENS).set_value(16).run()
    at.number_input(key=state.PRESENTER_OUTPUT_TOKENS).set_value(8).run()
    assert (at.session_state[state.PROMPT_TOKENS], at.session_state[state.MAX_NEW_TOKENS]) == (16, 8)  # the sidebar follows
    at.button(key=state.PRESENTER_RUN).click().run()
    assert not at.exception and not at.error
    trace = at.session_state[state.STORE].last_trace
    assert (trace.n_prompt, trace.n_output) == (16, 8)
    assert dict(at.query_params)["prompt_tokens"] == "16"  # the link names the lengths


def test_the_bars_example_fills_the_prompt(make_app):
    at = make_app(presenter=True).run()
    at.selectbox(key=state.PRESENTER_EXAMPLE).set_value("chat").run()
    assert at.session_state[state.EXAMPLE] == "chat"
    assert at.session_state[state.PROMPT] == prompts.example("chat").text
    at.sidebar.slider(key=state.PROMPT_TOKENS).set_value(40).run()  # and the bar follows the sidebar
    assert at.number_input(key=state.PRESENTER_PROMPT_TOKENS).value == 40


def test_no_bar_outside_presenter_mode(make_app):
    at = make_app().run()
    assert not at.exception
    assert state.PRESENTER_RUN not in [b.key for b in at.main.button]


def test_replay_only_presenter_bar_has_pages_but_no_run(make_app, monkeypatch):
    monkeypatch.setenv("TWO_BENDS_REPLAY", "1")
    at = make_app(presenter=True).run()
    assert not at.exception
    assert "Decode" in _labels(_bar(at), "page_link") and "Sweep lab" not in _labels(_bar(at), "page_link")
    assert state.PRESENTER_RUN not in [b.key for b in at.main.button]


@pytest.mark.parametrize("page", STORY)
@pytest.mark.parametrize("presenter", [False, True])
def test_the_empty_state_says_where_run_is_with_an_icon_that_ships(make_app, page, presenter):
    at = make_app(presenter=presenter).run()
    if page != STORY[0]:
        at.switch_page(page).run()
    assert not at.exception
    hints = [i for i in at.info if "Press Run" in i.value]
    assert len(hints) == 1
    hint = hints[0]
    assert ("Press Run above" in hint.value) == presenter and ("in the sidebar" in hint.value) != presenter
    assert hint.icon.startswith(":material/")  # a Material icon Streamlit ships, not an emoji
    assert all(ord(ch) < 0x2600 for ch in hint.value)  # no emoji (👈 was a box in Debian's Chromium)
