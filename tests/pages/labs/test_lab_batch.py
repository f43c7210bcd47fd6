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
    table = at.dataframe[0].value
    result = at.session_state[state.STORE].labs[state.BATCH_RESULT]
    fused = len(result.separate)  # a Run's fused batch-1 step, where this machine's fast load kept one: shown apart
    assert list(table["batch"]) == [1, 2, 4] + [1] * fused and fused <= 1
    assert set(table["runs"]) == {4} and table["decode path"][:3].nunique() == 1  # every size: 4 rounds, one path
    assert table["decode path"].nunique() == 1 + fused  # the fused point names its own path
    assert len(at.get("plotly_chart")) == 2
    verdicts = ("paid the bridge more", "paid the valley more", "too busy to tell")
    assert sum(any(v in m.value for m in at.markdown) for v in verdicts) == 1  # one verdict, or held back
    assert any("same decode path" in c.value for c in at.caption)
    assert any("ridge point" in m.value for m in at.markdown)  # explained with arithmetic intensity
    assert at.session_state[state.STORE].labs[state.PEAKS]  # measured once, kept for the session


def test_batch_page_words_follow_its_measured_points():
    """The text under the charts is generated from the sweep's own numbers (tiny model, measured now)."""
    at = open_lab("lab_batch")
    at.multiselect(key=state.BATCH_SIZES).set_value([1, 4])
    at.number_input(key=state.BATCH_PROMPT).set_value(8)
    at.number_input(key=state.BATCH_OUTPUT).set_value(3)
    at.button(key=state.BATCH_RUN).click().run()
    no_exception(at)
    points = at.session_state[state.STORE].labs[state.BATCH_RESULT].points
    first, last = points[0], points[-1]
    expected = (f"{first.prefill_tokens_per_s:,.0f} → {last.prefill_tokens_per_s:,.0f} tokens/s from B = 1 to B = 4 "
                f"(×{last.prefill_tokens_per_s / first.prefill_tokens_per_s:.1f}")
    assert any(expected in m.value for m in at.markdown)
    assert not any("saturates early" in m.value for m in at.markdown)
