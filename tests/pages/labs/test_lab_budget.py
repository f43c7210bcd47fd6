"""AppTest of pages/labs/lab_budget.py (Old Qin's budget): it renders, measures with the tiny model, shows no exception."""
import pytest

from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state


@pytest.mark.parametrize("button, saving", [(0, "10.0%"), (1, "40.0%")])
def test_budget_page_reproduces_the_fable(button, saving):
    at = open_lab("lab_budget")
    no_exception(at)
    at.button(key=f"{state.BUDGET_FABLE}_{button}").click().run()
    no_exception(at)
    assert at.metric[0].value == saving
    assert any("10% saved" in m.value and "40% saved" in m.value for m in at.markdown)


def test_budget_page_sources_change_the_share():
    at = open_lab("lab_budget")
    at.radio(key=state.BUDGET_SOURCE).set_value("custom").run()
    at.slider(key=state.BUDGET_SHARE).set_value(0.5)
    at.slider(key=state.BUDGET_PREFILL_SPEEDUP).set_value(2.0)
    at.slider(key=state.BUDGET_DECODE_SPEEDUP).set_value(1.0).run()
    no_exception(at)
    assert at.metric[0].value == "25.0%"  # 1 - (0.25 + 0.5)
    at.radio(key=state.BUDGET_SOURCE).set_value("preset").run()
    no_exception(at)
    assert any("estimate:" in m.value for m in at.markdown)
    at.radio(key=state.BUDGET_SOURCE).set_value("measured").run()
    no_exception(at)
    assert any("no run yet" in i.value for i in at.info)


def test_fable_share_is_said_as_a_fifth():
    """p = 20.0 % is 'a fifth' of the journey, not 'under a fifth'."""
    at = open_lab("lab_budget")
    no_exception(at)
    line = next(m.value for m in at.markdown if "Prefill share p" in m.value)
    assert "p = 20.0%" in line and "a fifth of the journey" in line and "under" not in line


def test_the_crossed_remedies_are_measured_and_the_cards_compared():
    """Each remedy on both requests (tiny model, one round: no verdict yet), the lights, the table; H100 -> H200."""
    at = open_lab("lab_budget")
    no_exception(at)
    assert any("only the bridge gets faster" in m.value for m in at.markdown)  # the card model, always shown
    at.number_input(key=state.CROSSED_ROUNDS).set_value(1)
    at.button(key=state.CROSSED_RUN).click().run()
    no_exception(at)
    result = at.session_state[state.STORE].labs[state.CROSSED_RESULT]
    assert result.rounds == 1 and set(result.requests) == {"valley-heavy", "bridge-heavy"}
    table = at.dataframe[-1].value
    assert set(table["request"]) == {"valley-heavy", "bridge-heavy"} and (table["rounds"] == 1).all()
    assert all("too few rounds" in cell for cell in table["end to end"])  # one round: no verdict
    # a fused step is measured where this machine's fast load kept one for the tiny model, else said to be missing
    assert ("fused" in result.remedies) != ("fused" in result.skipped)
    assert any("Not measured here: fused" in m.value for m in at.markdown) == ("fused" in result.skipped)
