"""AppTest for the sweep, batch, roofline and budget lab pages (tiny model, set in conftest)."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.labs import sweeps
from ui.controls import state
from ui.engine_link.run_store import RunStore

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _page(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(f"pages/labs/{name}.py")
    return at.run()


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_sweep_page_runs_a_prompt_sweep_and_an_output_sweep():
    at = _page("lab_sweeps")
    _ok(at)
    at.multiselect(key=state.SWEEP_PROMPT_LENGTHS).set_value([16, 32, 64])
    at.number_input(key=state.SWEEP_FIXED_OUTPUT).set_value(3)
    at.button(key=state.SWEEP_RUN).click().run()
    _ok(at)
    table = at.dataframe[0].value
    assert list(table["prompt tokens"]) == [16, 32, 64] and set(table["output tokens"]) == {3}
    assert len(at.get("plotly_chart")) == 3
    assert any("a = " in m.value for m in at.markdown)  # the fit's terms are reported
    assert "3 of 3 points" in at.caption[0].value

    at.radio(key=state.SWEEP_KIND).set_value("output").run()
    _ok(at)
    at.multiselect(key=state.SWEEP_OUTPUT_LENGTHS).set_value([4, 8])
    at.number_input(key=state.SWEEP_FIXED_PROMPT).set_value(8)
    at.button(key=state.SWEEP_RUN).click().run()
    _ok(at)
    assert list(at.dataframe[0].value["output tokens"]) == [4, 8]


def test_sweep_page_skips_lengths_beyond_the_context():
    at = _page("lab_sweeps")
    at.multiselect(key=state.SWEEP_PROMPT_LENGTHS).set_value([16, 1024])  # tiny-llama holds 256 tokens
    at.button(key=state.SWEEP_RUN).click().run()
    _ok(at)
    assert any("Skipped" in w.value for w in at.warning)
    assert list(at.dataframe[0].value["prompt tokens"]) == [16]


def test_sweep_page_reports_a_cancelled_sweep():
    at = _page("lab_sweeps")
    partial = sweeps.SweepResult("prompt", planned=[8, 16, 32], model="tiny", device="cpu")
    partial.points.append(sweeps.SweepPoint("prompt", 1, 8, 3, 0.01, 0.02, 0.01, 0.01, 0.03, 800.0, 100.0, [9, 10],
                                            [0.01, 0.01]))
    partial.cancelled = True  # as the page marks it when Cancel stops the sweep after its first point
    at.session_state[state.STORE] = RunStore(labs={state.SWEEP_RESULTS: {"prompt": partial}})
    at.run()
    _ok(at)
    assert "Cancelled after 1 of 3" in at.caption[0].value
    assert len(at.dataframe[0].value) == 1


def test_batch_page_runs_and_marks_the_crossover():
    at = _page("lab_batch")
    _ok(at)
    at.multiselect(key=state.BATCH_SIZES).set_value([1, 2, 4])
    at.number_input(key=state.BATCH_PROMPT).set_value(8)
    at.number_input(key=state.BATCH_OUTPUT).set_value(3)
    at.button(key=state.BATCH_RUN).click().run()
    _ok(at)
    assert list(at.dataframe[0].value["batch"]) == [1, 2, 4]
    assert len(at.get("plotly_chart")) == 2
    assert any("ridge point" in m.value for m in at.markdown)  # explained with arithmetic intensity
    assert at.session_state[state.STORE].labs[state.PEAKS]  # measured once, kept for the session


def test_roofline_page_measures_and_predicts():
    at = _page("lab_roofline")
    _ok(at)
    assert [m.label for m in at.metric][:3] == ["Copy bandwidth (measured)", "Matmul FLOP/s (measured)", "Ridge point"]
    points = at.dataframe[0].value
    assert list(points["phase"]) == ["prefill", "decode"]
    before = at.dataframe[1].value["TTFT (ms, est.)"].tolist()
    at.selectbox(key=state.ROOF_MODEL).set_value("Llama-2 7B (MHA, 32 KV heads)").run()
    _ok(at)
    after = at.dataframe[1].value["TTFT (ms, est.)"].tolist()
    assert all(a > b for a, b in zip(after, before))  # a 7B model takes longer than SmolLM2 everywhere
    at.selectbox(key=state.ROOF_WORKLOAD).set_value("Code generation / writing").run()
    _ok(at)
    assert "decode" in at.dataframe[2].value["dominant phase"].iloc[-1]


@pytest.mark.parametrize("button, saving", [(0, "10.0%"), (1, "40.0%")])
def test_budget_page_reproduces_the_fable(button, saving):
    at = _page("lab_budget")
    _ok(at)
    at.button(key=f"{state.BUDGET_FABLE}_{button}").click().run()
    _ok(at)
    assert at.metric[0].value == saving
    assert any("10% saved" in m.value and "40% saved" in m.value for m in at.markdown)


def test_budget_page_sources_change_the_share():
    at = _page("lab_budget")
    at.radio(key=state.BUDGET_SOURCE).set_value("custom").run()
    at.slider(key=state.BUDGET_SHARE).set_value(0.5)
    at.slider(key=state.BUDGET_PREFILL_SPEEDUP).set_value(2.0)
    at.slider(key=state.BUDGET_DECODE_SPEEDUP).set_value(1.0).run()
    _ok(at)
    assert at.metric[0].value == "25.0%"  # 1 - (0.25 + 0.5)
    at.radio(key=state.BUDGET_SOURCE).set_value("preset").run()
    _ok(at)
    assert any("estimate:" in m.value for m in at.markdown)
    at.radio(key=state.BUDGET_SOURCE).set_value("measured").run()
    _ok(at)
    assert any("No run yet" in i.value for i in at.info)
