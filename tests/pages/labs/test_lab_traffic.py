"""AppTest of pages/labs/lab_traffic.py (Traffic lab): a short burst replayed per policy with the tiny model."""
from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state


def small_burst(at, policies=("queue", "batch")):
    at.toggle(key=state.TRAFFIC_BURST).set_value(True)
    at.number_input(key=state.TRAFFIC_PROMPT).set_value(12)
    at.number_input(key=state.TRAFFIC_OUTPUT).set_value(5)
    at.number_input(key=state.TRAFFIC_REQUESTS).set_value(4)
    at.multiselect(key=state.TRAFFIC_POLICIES).set_value(list(policies))
    return at


def test_traffic_page_compares_policies_on_one_burst():
    at = open_lab("lab_traffic")
    no_exception(at)
    assert any("press **Run traffic**" in i.value for i in at.info)
    small_burst(at, ("queue", "batch", "chunked")).button(key=state.TRAFFIC_RUN).click().run()
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["policy"]) == ["queue (one at a time)", "continuous batching", "+ chunked prefill"]
    assert list(table["served"])[:2] == [4, 4]
    assert (table["goodput (req/s)"][:2] <= table["throughput (req/s)"][:2] + 1e-9).all()
    assert len(at.get("plotly_chart")) == 4  # TTFT, ITL, goodput, the step timeline
    assert any("Best goodput" in m.value for m in at.markdown)
    result = at.session_state[state.STORE].labs[state.TRAFFIC_RESULT]
    assert [r.arrived_s for r in result.policies[0].requests] == [r.arrived_s for r in result.policies[1].requests]
    # a tighter SLO is judged again from the same measurement, without running anything
    at.number_input(key=state.TRAFFIC_SLO_TTFT).set_value(1.0)
    at.number_input(key=state.TRAFFIC_SLO_TPOT).set_value(1.0)
    at.run()
    assert at.session_state[state.STORE].labs[state.TRAFFIC_RESULT] is result
    assert set(at.dataframe[0].value["met both SLOs"][:2]) <= {"0/4", "1/4", "2/4", "3/4", "4/4"}
    at.radio(key=state.TRAFFIC_TIMELINE).set_value("batch").run()
    no_exception(at)


def test_traffic_page_refuses_bad_inputs_in_one_line():
    at = open_lab("lab_traffic")
    small_burst(at, ()).run()
    no_exception(at)
    assert at.button(key=state.TRAFFIC_RUN).disabled
    assert any("Pick at least one policy" in c.value for c in at.caption)
    # too long for tiny-llama's 256-token context: the run says which request, in one line
    small_burst(at).number_input(key=state.TRAFFIC_PROMPT).set_value(300)
    at.run()
    at.button(key=state.TRAFFIC_RUN).click().run()
    no_exception(at)
    assert any("beyond tiny-llama" in e.value and "\n" not in e.value for e in at.error)


def test_picking_a_preset_sets_its_lengths():
    at = open_lab("lab_traffic")
    at.selectbox(key=state.TRAFFIC_PRESET).set_value("summarisation").run()
    assert at.number_input(key=state.TRAFFIC_PROMPT).value == 512
    assert at.number_input(key=state.TRAFFIC_OUTPUT).value == 32
