"""AppTest of pages/labs/lab_fleet.py (the fleet planner): plans with the card model, says what is estimated and what is
measured here, splits the bill by stage, gives a split fleet's decode pool its own card, says which card for which
stage — and reads nothing recorded on another machine."""
from tests.pages.labs.lab_helpers import no_exception, open_lab, open_lab_alone
from ui import state


def test_page_plans_the_cheapest_fleet_and_splits_the_bill():
    at = open_lab_alone("lab_fleet")
    no_exception(at)
    assert any("**Estimated**" in i.value and "**Measured here**" in i.value and "another machine" in i.value
               for i in at.info)
    at.number_input(key=state.FLEET_REQUESTS).set_value(200)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    text = " ".join(m.value for m in at.markdown)
    assert "Cheapest fleet meeting the SLOs" in text and "The bill by stage" in text
    assert any("estimate: the card model" in c.value for c in at.caption)  # the card's step model is labelled as one
    assert "Which card for which stage" in text


def test_a_split_fleet_may_give_the_decode_pool_other_cards():
    at = open_lab_alone("lab_fleet")
    at.number_input(key=state.FLEET_REQUESTS).set_value(200)
    at.multiselect(key=state.FLEET_POLICIES).set_value(["disagg"])
    at.selectbox(key=state.FLEET_DECODE_CARD).set_value("NVIDIA H200 SXM").run()
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    assert any("Decode cards: NVIDIA H200 SXM" in c.value for c in at.caption)
    assert any("(prefill) and NVIDIA H200 SXM (decode)" in m.value for m in at.markdown)


def test_bad_objective_is_one_clear_line():
    at = open_lab_alone("lab_fleet")
    at.number_input(key=state.FLEET_TTFT).set_value(0.0)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    assert [e.value for e in at.error] == ["the TTFT objective must be a number of seconds > 0, not 0.0"]


def test_page_opens_inside_the_app_and_adds_this_machine_once_measured():
    at = open_lab("lab_fleet")
    no_exception(at)
    assert any("fleet planner" in t.value for t in at.title)
    at.button(key=state.FLEET_PEAKS_MEASURE).click().run()
    no_exception(at)
    cards = at.selectbox(key=state.FLEET_CARD).options
    assert cards[0].startswith("this machine")
    assert any(str(r).startswith("this machine") for r in at.dataframe[-1].value["card"])


def test_custom_workload_of_long_prompts_puts_the_bill_on_the_valley():
    at = open_lab_alone("lab_fleet")
    at.selectbox(key=state.FLEET_WORKLOAD).set_value("custom").run()
    at.number_input(key=state.FLEET_PROMPT).set_value(2048)
    at.number_input(key=state.FLEET_OUTPUT).set_value(0)
    at.number_input(key=state.FLEET_REQUESTS).set_value(200)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    assert any("the valley (prefill) takes **100%**" in m.value for m in at.markdown)
