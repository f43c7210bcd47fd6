"""AppTest of pages/labs/lab_batch.py (Batch lab): it renders, measures with the tiny model, shows no exception."""

from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state


def test_batch_page_runs_and_marks_the_crossover():
    at = open_lab("lab_batch")
    no_exception(at)
    at.multiselect(key=state.BATCH_SIZES).set_value([1, 2, 4])
    at.number_input(key=state.BATCH_PROMPT).set_value(8)
    at.number_input(key=state.BATCH_OUTPUT).set_value(3)
    at.button(key=state.BATCH_RUN).click().run()
    no_exception(at)
    assert list(at.dataframe[0].value["batch"]) == [1, 2, 4]
    assert len(at.get("plotly_chart")) == 2
    assert any("ridge point" in m.value for m in at.markdown)  # explained with arithmetic intensity
    assert at.session_state[state.STORE].labs[state.PEAKS]  # measured once, kept for the session
