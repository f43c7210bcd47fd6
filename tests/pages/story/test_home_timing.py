"""AppTest for the shared sidebar, the run panel, Home and Timing (tiny model; one real-model test marked slow)."""
import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT, navigation_only
from ui import state

APP = str(ROOT / "app.py")



@pytest.fixture
def app(monkeypatch):
    navigation_only(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    return at.run()


def run(at: AppTest) -> AppTest:
    return at.sidebar.button(key=state.RUN).click().run()


def last(at: AppTest):
    """The session's latest finished run (ui.engine_link.run_store.RunStore.last_trace)."""
    return at.session_state[state.STORE].last_trace


def texts(at: AppTest) -> str:
    return "\n".join(t.value for t in at.text)


def test_home_before_run_calls_to_action(app):
    assert not app.exception
    assert any("Press Run" in i.value for i in app.info)
    assert any("64 tokens" in m.value for m in app.sidebar.markdown)


def test_timing_before_run(app):
    app.switch_page("pages/story/timing.py").run()
    assert not app.exception
    assert any("Press Run" in i.value for i in app.info)


def test_run_shows_metrics_text_and_ledger(app):
    run(app)
    assert not app.exception and not app.error
    trace = last(app)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["TTFT (prefill)"].endswith(" ms") and metrics["Tokens in"] == "64"
    assert metrics["Tokens out"] == str(trace.n_output)
    assert trace.text.strip() and trace.text.strip() in texts(app)
    assert trace.attention is not None  # captured for the Prefill/Decode pages
    # the verdict, whichever it is: the tiny model's millisecond steps on a busy machine can land "close to even"
    assert any("dominates: " in m.value or "Close to even: " in m.value for m in app.markdown)
    heading = next(h.value for h in app.subheader if h.value.startswith("This request"))
    assert heading.endswith("float32")  # the kernels' long label is the caption under it
    assert "Measured on this machine in this session." in [c.value for c in app.main.caption]  # where it comes from
    assert f"Kernels: {trace.env['kernels']}" in [c.value for c in app.main.caption]

    app.switch_page("pages/story/timing.py").run()  # switching pages does not re-run the model
    assert not app.exception
    assert last(app) is trace and len(app.session_state[state.STORE].history) == 1
    assert len(app.table) == 1 and len(app.dataframe) == 2  # the metrics as a static table: definitions wrap
    metric_rows = app.table[0].value.set_index("metric")
    assert metric_rows.loc["TTFT", "value"] == pytest.approx(trace.prefill_seconds * 1000)

    run(app)  # a second run lands in the history; the older one drops its bulky attention capture
    history = app.session_state[state.STORE].history
    assert len(history) == 2 and history[0].attention is None and history[1].attention is None  # light copies
    assert last(app).attention is not None  # the newest run keeps what the pages draw
    assert list(app.dataframe[1].value["run"]) == [1, 2]


def test_output_length_slider_changes_output_tokens(app):
    counts = []
    for n in (4, 11):
        app.sidebar.slider(key=state.MAX_NEW_TOKENS).set_value(n)
        run(app)
        trace = last(app)
        assert not app.exception and trace.settings["max_new_tokens"] == n
        counts.append(trace.n_output)
        if trace.stop_reason == "length":
            assert trace.n_output == n
    assert counts[0] != counts[1]


def test_prompt_length_slider_sets_exact_prompt_tokens(app):
    app.sidebar.slider(key=state.PROMPT_TOKENS).set_value(100)
    run(app)
    assert last(app).n_prompt == 100
    assert {m.label: m.value for m in app.metric}["Tokens in"] == "100"


def test_empty_prompt_is_a_friendly_message(app):
    app.sidebar.text_area(key=state.PROMPT).set_value("   ").run()
    assert not app.exception
    assert any("empty" in w.value for w in app.sidebar.warning)
    run(app)
    assert not app.exception
    assert any("empty" in e.value for e in app.error)
    assert state.STORE not in app.session_state or last(app) is None


def test_too_long_prompt_is_refused_with_the_limit(app):
    app.sidebar.slider(key=state.PROMPT_TOKENS).set_value(300)  # the tiny model holds 256 tokens
    run(app)
    assert not app.exception
    assert any("256" in e.value for e in app.error)


def test_script_in_prompt_is_shown_as_text(app):
    prompt = "<script>alert(1)</script>"
    app.sidebar.checkbox(key=state.FIT_PROMPT).uncheck()
    app.sidebar.text_area(key=state.PROMPT).set_value(prompt)
    run(app)
    assert not app.exception and not app.error
    assert prompt in texts(app)  # st.text: shown literally
    assert not any("<script" in m.value for m in app.markdown)  # never handed to Markdown/HTML


def test_example_picker_fills_the_prompt(app):
    app.sidebar.selectbox(key=state.EXAMPLE).set_value("code").run()
    assert app.sidebar.text_area(key=state.PROMPT).value.startswith("Explain what the following Python code does")


def test_default_run_on_real_smollm(monkeypatch):
    navigation_only(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[state.MODEL] = "smollm2-135m"
    run(at.run())
    assert not at.exception and not at.error
    trace = last(at)
    assert "SmolLM2" in trace.model and trace.n_prompt == 64 and trace.n_output >= 1
    assert trace.text.strip() and trace.text.strip() in texts(at)
    print(f"\nSmolLM2 default run: TTFT {trace.prefill_seconds * 1000:.1f} ms, "
          f"{trace.n_output} tokens, total {trace.total_seconds:.2f} s, capture {trace.capture_seconds:.2f} s")


def test_sidebar_says_how_many_threads_the_operator_gave_the_model(app, monkeypatch):
    assert "the model on" not in "\n".join(c.value for c in app.sidebar.caption)  # default: every core, not said
    monkeypatch.setenv("TWO_BENDS_THREADS", "1")  # dashboard.sh --model-threads 1
    app.run()
    assert any("the model on 1 thread." in c.value for c in app.sidebar.caption)


def test_timing_shows_the_spread_of_repeated_runs(app):
    """Two runs of the same request: Timing's comparison gives their median and range, from the measured runs."""
    run(app)
    run(app)
    app.switch_page("pages/story/timing.py").run()
    assert not app.exception
    history = app.session_state[state.STORE].history
    ttfts = sorted(t.prefill_seconds * 1000 for t in history)
    expected = (f"The same 64 → {history[0].n_output} request, 2 runs: TTFT median {sum(ttfts) / 2:,.1f} ms "
                f"(range {ttfts[0]:,.1f}–{ttfts[1]:,.1f}")
    assert any(expected in m.value for m in app.markdown)
