"""AppTest of pages/labs/lab_sweeps.py (Sweep lab): it renders, measures with the tiny model, shows no exception."""

from engine.labs import sweeps
from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state
from ui.engine_link.run_store import RunStore


def test_sweep_page_runs_a_prompt_sweep_and_an_output_sweep():
    at = open_lab("lab_sweeps")
    no_exception(at)
    at.multiselect(key=state.SWEEP_PROMPT_LENGTHS).set_value([16, 32, 64])
    at.number_input(key=state.SWEEP_FIXED_OUTPUT).set_value(3)
    at.button(key=state.SWEEP_RUN).click().run()
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["prompt tokens"]) == [16, 32, 64] and set(table["output tokens"]) == {3}
    assert len(at.get("plotly_chart")) == 3
    assert any("a = " in m.value for m in at.markdown)  # the fit's terms are reported
    assert "3 of 3 points" in at.caption[0].value

    at.radio(key=state.SWEEP_KIND).set_value("output").run()
    no_exception(at)
    at.multiselect(key=state.SWEEP_OUTPUT_LENGTHS).set_value([4, 8])
    at.number_input(key=state.SWEEP_FIXED_PROMPT).set_value(8)
    at.button(key=state.SWEEP_RUN).click().run()
    no_exception(at)
    assert list(at.dataframe[0].value["output tokens"]) == [4, 8]


def test_sweep_page_skips_lengths_beyond_the_context():
    at = open_lab("lab_sweeps")
    at.multiselect(key=state.SWEEP_PROMPT_LENGTHS).set_value([16, 1024])  # tiny-llama holds 256 tokens
    at.button(key=state.SWEEP_RUN).click().run()
    no_exception(at)
    assert any("Skipped" in w.value for w in at.warning)
    assert list(at.dataframe[0].value["prompt tokens"]) == [16]


def test_sweep_page_reports_a_cancelled_sweep():
    at = open_lab("lab_sweeps")
    partial = sweeps.SweepResult("prompt", planned=[8, 16, 32], model="tiny", device="cpu")
    partial.points.append(sweeps.SweepPoint("prompt", 1, 8, 3, 0.01, 0.02, 0.01, 0.01, 0.03, 800.0, 100.0, [9, 10],
                                            [0.01, 0.01]))
    partial.cancelled = True  # as the page marks it when Cancel stops the sweep after its first point
    at.session_state[state.STORE] = RunStore(labs={state.SWEEP_RESULTS: {"prompt": partial}})
    at.run()
    no_exception(at)
    assert "Cancelled after 1 of 3" in at.caption[0].value
    assert len(at.dataframe[0].value) == 1
