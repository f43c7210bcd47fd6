"""The shared sidebar (AppTest): "Reset to defaults" and the glossary, on every page."""
import pytest

from ui import state
from ui.controls import widgets
from ui.demo import links


def test_reset_puts_every_sidebar_setting_back_and_keeps_the_runs(make_app):
    at = make_app().run()
    at.sidebar.button(key=state.RUN).click().run()
    store = at.session_state[state.STORE]
    first = store.last_trace
    at.sidebar.selectbox(key=state.EXAMPLE).set_value("chat").run()
    at.sidebar.slider(key=state.PROMPT_TOKENS).set_value(200).run()
    at.sidebar.slider(key=state.MAX_NEW_TOKENS).set_value(100).run()
    at.sidebar.slider(key=state.TEMPERATURE).set_value(0.8).run()
    at.sidebar.number_input(key=state.SEED).set_value(9).run()
    at.sidebar.toggle(key=state.CHAT).set_value(True).run()
    at.sidebar.radio(key=state.KERNELS).set_value("plain").run()
    assert dict(at.query_params).get("prompt_tokens") == "200"
    at.sidebar.button(key=state.SETTINGS_RESET).click().run()
    assert not at.exception
    defaults = widgets.defaults()
    for key in (state.EXAMPLE, state.PROMPT, state.PROMPT_TOKENS, state.MAX_NEW_TOKENS, state.TEMPERATURE, state.SEED,
                state.CHAT, state.KERNELS, state.FIT_PROMPT, state.TOP_K, state.TOP_P):
        assert at.session_state[key] == defaults[key], key
    assert at.sidebar.slider(key=state.PROMPT_TOKENS).value == widgets.DEFAULT_PROMPT_TOKENS  # the widgets show it
    assert store.last_trace is first  # the runs stay
    assert dict(at.query_params) == {"page": "home"}  # the link is back to the defaults too


def test_the_defaults_are_the_links_defaults():
    defaults = widgets.defaults()
    for param in links.PARAMS.values():
        if param.key not in (state.PRESENTER, state.DARK_THEME):  # how the page looks, not what it runs: Reset keeps them
            assert defaults[param.key] == param.default, param.key


@pytest.mark.parametrize("page", ["pages/story/home.py", "pages/story/timing.py", "pages/labs/lab_sweeps.py",
                                  "pages/serving/measure_server.py"])
def test_the_glossary_is_in_the_sidebar_of_every_page(make_app, page):
    at = make_app().run()
    at.switch_page(page).run()
    assert not at.exception
    glossary = "\n".join(m.value for m in at.sidebar.markdown)
    for term in ("TTFT", "TPOT", "ITL", "KV cache", "GEMM / GEMV", "MFU", "Roofline", "Prefill", "Decode"):
        assert f"**{term}**" in glossary


def test_the_glossary_is_in_the_replay_only_sidebar(make_app, monkeypatch):
    monkeypatch.setenv("TWO_BENDS_REPLAY", "1")
    at = make_app().run()
    assert not at.exception
    assert any("**TTFT** (time to first token)" in m.value for m in at.sidebar.markdown)


def test_the_sidebar_says_which_kernels_were_measured_fastest(make_app):
    at = make_app().run()
    assert not at.exception
    captions = "\n".join(c.value for c in at.sidebar.caption)
    assert "kernels: fast: " in captions and "Why these kernels — decode step's matmuls: " in captions
    folded = [e for e in at.sidebar.expander if e.label == "Why these kernels (measured here)"]
    assert len(folded) == 1 and "decode step's matmuls: " in "\n".join(c.value for c in folded[0].caption)


def test_a_failed_run_leaves_its_error_and_no_cancel_button_or_stale_progress(make_app):
    """A run the engine refuses (a prompt longer than the tiny model's context, from a link with run=1): the panel
    keeps the error only, not a 'Cancel this run' for a run that is over or the prefill progress line."""
    at = make_app(query={"prompt_tokens": "512", "output_tokens": "8", "run": "1"}).run()
    assert any("Cannot run: the prompt is 512 tokens" in e.value for e in at.error)
    assert not [b for b in at.button if b.label == "■ Cancel this run"]
    assert not [p for p in at.get("progress")]


def test_each_sidebar_widget_carries_its_current_value_as_its_own_default(make_app):
    """A browser mounts a widget from whichever script run's message reaches it first; a later run's message holds the
    widget without its session-state value. Run pressed before a slow browser had drawn the first run's sidebar left
    the prompt box on its bare default: empty (seen in headless Chromium on a 2-vCPU machine). Each widget's default in
    the message must be the value it holds, also after the user changed it."""
    at = make_app().run()
    at.sidebar.slider(key=state.PROMPT_TOKENS).set_value(200).run()
    at.sidebar.text_area(key=state.PROMPT).set_value("A prompt typed by hand.").run()
    assert not at.exception
    sidebar = at.sidebar
    assert sidebar.text_area(key=state.PROMPT).proto.default == "A prompt typed by hand."
    assert sidebar.checkbox(key=state.FIT_PROMPT).proto.default is True
    assert list(sidebar.slider(key=state.PROMPT_TOKENS).proto.default) == [200]
    assert list(sidebar.slider(key=state.MAX_NEW_TOKENS).proto.default) == [widgets.DEFAULT_OUTPUT_TOKENS]
    assert sidebar.toggle(key=state.LIVE_CHART).proto.default is True
    assert list(sidebar.slider(key=state.TOP_P).proto.default) == [1.0]
