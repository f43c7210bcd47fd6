"""AppTest of pages/labs/lab_traffic.py (Traffic lab): a short burst replayed per policy with the tiny model."""
from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state
from ui.text import traffic_text as tt


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
    small_burst(at, ("queue", "batch", "chunked", "disaggregated")).run()  # the chunk budget comes alive
    at.number_input(key=state.TRAFFIC_PROMPT).set_value(40)
    at.number_input(key=state.TRAFFIC_CHUNK).set_value(16)  # a 40-token prompt in three chunks
    at.button(key=state.TRAFFIC_RUN).click().run()
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["policy"]) == ["queue (one at a time)", "continuous batching", "+ chunked prefill",
                                     "disaggregated prefill/decode"]
    assert list(table["served"]) == [4, 4, 4, 4] and set(table["note"].fillna("")) == {""}
    assert (table["goodput (req/s)"] <= table["throughput (req/s)"] + 1e-9).all()
    carts = at.dataframe[1].value  # the disaggregated run's KV handover, one cart per request
    assert list(carts["request"]) == ["#1", "#2", "#3", "#4"] and (carts["KV cache (KiB)"] > 0).all()
    assert len(at.get("plotly_chart")) == 4  # TTFT, ITL, goodput, the step timeline
    assert any("Best goodput" in m.value for m in at.markdown)
    assert any("KV carts crossed between the workers" in m.value for m in at.markdown)
    result = at.session_state[state.STORE].labs[state.TRAFFIC_RESULT]
    assert len({tuple(r.arrived_s for r in p.requests) for p in result.policies}) == 1  # the same arrivals for all
    chunked = tt.policy_run(result, "chunked")
    assert max(first for s in chunked.steps for _, first, _ in s.chunks) > 0  # prompts cut into pieces
    # a tighter SLO is judged again from the same measurement, without running anything
    at.number_input(key=state.TRAFFIC_SLO_TTFT).set_value(1.0)
    at.number_input(key=state.TRAFFIC_SLO_TPOT).set_value(1.0)
    at.run()
    assert at.session_state[state.STORE].labs[state.TRAFFIC_RESULT] is result
    assert set(at.dataframe[0].value["met both SLOs"][:2]) <= {"0/4", "1/4", "2/4", "3/4", "4/4"}
    for policy, words in (("chunked", tt.CHUNKED_HELP), ("disaggregated", tt.LANES_HELP)):
        at.radio(key=state.TRAFFIC_TIMELINE).set_value(policy).run()
        no_exception(at)
        assert any(c.value == words for c in at.caption)


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
