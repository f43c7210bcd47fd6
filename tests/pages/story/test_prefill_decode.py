"""AppTest of the Prefill (valley) and Decode (bridge) pages, with a tiny-model trace injected."""
import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

import engine
from tests import ROOT
from ui import state
from ui.engine_link.run_store import RunStore

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "The valley <script>alert('x')</script> and *the* bridge", 6,
                           capture_attention=True, ignore_eos=True)


def open_page(page: str, trace=None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page)
    if trace is not None:
        at.session_state[state.STORE] = RunStore(last_trace=trace)
    return at.run()


def figure_json(at: AppTest, index: int = 0) -> str:
    return at.get("plotly_chart")[index].proto.spec


@pytest.mark.parametrize("page", ["pages/story/prefill.py", "pages/story/decode.py"])
def test_pages_without_a_trace_ask_for_a_run(page):
    at = open_page(page)
    assert not at.exception
    assert any("Run" in info.value for info in at.info)
    assert not at.get("plotly_chart")


def test_prefill_page_draws_the_matrix_and_numbers(trace):
    at = open_page("pages/story/prefill.py", trace)
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert any("measured" in label for label in labels) and any("estimate" in label for label in labels)
    assert len(at.get("plotly_chart")) == 2  # the matrix and the prefill-vs-decode animation
    before = figure_json(at)
    at.selectbox(key=state.PREFILL_HEAD).set_value(1).run()
    assert not at.exception
    after = figure_json(at)
    assert after != before and "head 1" in after
    at.selectbox(key=state.PREFILL_LAYER).set_value(1).run()
    assert not at.exception and "layer 1" in figure_json(at)


def test_decode_page_steps_through_tokens(trace):
    at = open_page("pages/story/decode.py", trace)
    assert not at.exception
    assert at.slider(key=state.DECODE_POSITION).value == 0
    kv_before = figure_json(at)
    at.button(key=state.DECODE_NEXT).click().run()
    assert not at.exception
    assert at.session_state[state.DECODE_POSITION] == 1
    assert figure_json(at) != kv_before  # the cache grew one column
    assert any(f"{trace.steps[0].seconds * 1000:.1f} ms" == m.value for m in at.metric)  # that step's measured latency
    assert any(str(trace.n_prompt + 1) == m.value for m in at.metric)
    at.button(key=state.DECODE_NEXT).click().run()
    at.button(key=state.DECODE_PREV).click().run()
    assert at.session_state[state.DECODE_POSITION] == 1
    for _ in range(len(trace.steps) + 3):  # Next never runs past the last token
        at.button(key=state.DECODE_NEXT).click().run()
    assert at.session_state[state.DECODE_POSITION] == len(trace.steps)
    assert not at.exception


def test_decode_page_head_picker_changes_the_attention_row(trace):
    at = open_page("pages/story/decode.py", trace)
    row_before = figure_json(at, 1)
    at.selectbox(key=state.DECODE_HEAD).set_value(2).run()
    assert not at.exception
    assert figure_json(at, 1) != row_before and "head 2" in figure_json(at, 1)


def test_decode_page_escapes_model_text(trace):
    hostile = dataclasses.replace(trace, output_tokens=["<script>alert(1)</script>", " *x*", " :red[y]"] + trace.output_tokens[3:])
    at = open_page("pages/story/decode.py", hostile)
    at.button(key=state.DECODE_NEXT).click().run()
    at.button(key=state.DECODE_NEXT).click().run()
    assert not at.exception
    shown = [m.value for m in at.markdown if "script" in m.value]
    assert shown and all("\\<script\\>" in value for value in shown)
    assert any("\\*x\\*" in m.value for m in at.markdown)
