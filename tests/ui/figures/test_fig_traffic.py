"""ui/figures/fig_traffic.py and ui/text/traffic_text.py on a hand-made TrafficRun (no model): rows, bars, words."""
import math

import pytest

from engine.errors import EngineError
from engine.labs.traffic import HandoverRun, PolicyRun, RequestRun, StepRun, TrafficRun
from engine.perfmodel.goodput import SLO
from engine.perfmodel.workload import arrivals, shaped
from ui.figures import fig_traffic
from ui.text import traffic_text as tt

W = shaped("chat", request_rate=math.inf, prompt_tokens=8, output_tokens=3, num_requests=2)


def _run() -> TrafficRun:
    fast = PolicyRun("batch", "continuous batching", requests=[
        RequestRun(0, 0.0, 8, 3, started_s=0.0, first_s=0.1, token_s=[0.1, 0.15, 0.2]),
        RequestRun(1, 0.0, 8, 3, started_s=0.1, first_s=0.2, token_s=[0.2, 0.25, 0.3])],
        steps=[StepRun("prefill", 0.0, 0.1, [0]), StepRun("prefill", 0.1, 0.2, [1]),
               StepRun("decode", 0.2, 0.25, [0, 1]), StepRun("decode", 0.25, 0.3, [1])])
    slow = PolicyRun("queue", "queue (one at a time)", requests=[
        RequestRun(0, 0.0, 8, 3, started_s=0.0, first_s=0.1, token_s=[0.1, 0.5, 0.9]),
        RequestRun(1, 0.0, 8, 3, started_s=0.9, error="cancelled")])
    missing = PolicyRun("chunked", "+ chunked prefill", available=False, note="chunked: not in this engine yet")
    return TrafficRun(W, 0, arrivals(W, 0), [slow, fast, missing], "tiny-llama", "cpu", 8, 256)


def test_table_judges_each_policy_against_the_slos():
    table = tt.policy_table(_run(), SLO(0.25, 0.1))
    assert list(table["policy"]) == ["queue (one at a time)", "continuous batching", "+ chunked prefill"]
    assert list(table["met both SLOs"][:2]) == ["0/2", "2/2"]  # queue: TPOT 400 ms; one failed
    assert table["goodput (req/s)"][1] == pytest.approx(2 / 0.3, rel=1e-2) and table["served"][0] == 1
    assert table["note"][2] == "chunked: not in this engine yet"
    words = tt.findings(_run(), SLO(0.25, 0.1))
    assert "Best goodput: **continuous batching**" in words and "Not in this engine yet: + chunked prefill" in words


def test_figures_draw_the_policies_that_ran():
    run, slo = _run(), SLO(0.25, 0.1)
    assert [b.name for b in fig_traffic.ttft_figure(run, slo).data] == ["queue (one at a time)", "continuous batching"]
    assert len(fig_traffic.itl_figure(run, slo).data[1].y) == 4
    good = fig_traffic.goodput_figure(run, slo).data
    assert list(good[1].y)[0] == 0.0 and list(good[1].y)[1] > 0
    timeline = fig_traffic.timeline_figure(run.policies[1])
    waiting, prefill, decode = timeline.data
    assert list(waiting.y) == ["#2"] and list(prefill.y) == ["#1", "#2"]
    assert list(decode.y) == ["#1", "#2", "#2"] and decode.text[0].startswith("2 rider(s): #1, #2")


def test_the_pages_inputs_make_the_same_workload_as_measure():
    w = tt.workload_from("code", burst=False, rate=3.0, burstiness=0.5, prompt_tokens=40, prompt_spread=0.2,
                         output_tokens=300, output_spread=0.1, num_requests=9)
    assert w == shaped("code", request_rate=3.0, burstiness=0.5, prompt_tokens=40, prompt_spread=0.2, output_tokens=300,
                       output_spread=0.1, num_requests=9)
    assert w.prompt.low == 8 and w.output.high == 1024  # the preset's bounds stay
    assert math.isinf(tt.workload_from("chat", True, 1.0, 1.0, 8, 0, 4, 0, 2).request_rate)
    assert tt.check("chat", [], **dict(burst=True, rate=1.0, burstiness=1.0, prompt_tokens=8, prompt_spread=0.0,
                                       output_tokens=4, output_spread=0.0, num_requests=2)) == "Pick at least one policy to compare."
    with pytest.raises(EngineError, match="burstiness"):
        tt.workload_from("chat", False, 1.0, 0.0, 8, 0, 4, 0, 2)


def test_a_policy_the_engine_refused_says_why_not_not_yet():
    run = _run()
    run.policies[2].note = "the chunk budget must be a whole number of tokens >= 1, not 0"
    words = tt.findings(run, SLO(1, 1))
    assert "Not in this engine yet" not in words and "+ chunked prefill could not run: the chunk budget" in words


def _disaggregated() -> PolicyRun:
    return PolicyRun("disaggregated", "disaggregated prefill/decode", requests=[
        RequestRun(0, 0.0, 8, 3, started_s=0.0, first_s=0.1, token_s=[0.1, 0.2, 0.3]),
        RequestRun(1, 0.0, 8, 1, started_s=0.1, first_s=0.2, token_s=[0.2])],
        steps=[StepRun("prefill", 0.0, 0.1, [0], [(0, 0, 8)], "prefill"),
               StepRun("handover", 0.1, 0.11, [0], worker="prefill", bytes=4096),
               StepRun("prefill", 0.11, 0.2, [1], [(1, 0, 8)], "prefill"),
               StepRun("join", 0.12, 0.13, [0], worker="decode", bytes=4096),
               StepRun("decode", 0.13, 0.2, [0], worker="decode"), StepRun("decode", 0.2, 0.3, [0], worker="decode")],
        handovers=[HandoverRun(0, 4096, 8, 0.002, 0.001, 0.03)])


def test_the_disaggregated_timeline_draws_both_lanes_and_each_cart_between_them():
    fig = fig_traffic.timeline_figure(_disaggregated())
    by = {t.name: t for t in fig.data}
    prefill_lane, decode_lane = fig_traffic.LANES
    assert set(by["prefill"].y) == {prefill_lane} and len(by["prefill"].y) == 2
    assert set(by["decode step"].y) == {decode_lane} and list(by["unpack the cart"].y) == [decode_lane]
    assert list(by["pack the cart"].y) == [prefill_lane]
    cart = by["KV handover"]  # from where the valley packed it (100 ms) to where the bridge took it in (130 ms)
    assert list(cart.x) == [pytest.approx(100.0), pytest.approx(130.0), None]
    assert list(cart.y) == [prefill_lane, decode_lane, None] and "4.0 KiB" in cart.text[0]
    run = _run()
    run.policies[1] = _disaggregated()
    words = tt.findings(run, SLO(1, 1))
    assert "1 KV carts crossed between the workers, on average 4.0 KiB and 30.0 ms each" in words
    table = tt.handover_table(run.policies[1])
    assert list(table["request"]) == ["#1"] and table["KV cache (KiB)"][0] == 4.0 and table["crossing (ms)"][0] == 30.0
    assert tt.timeline_help(run.policies[1]) == tt.LANES_HELP


def test_the_chunked_timeline_draws_each_chunk_on_its_request_and_names_who_shared_the_step():
    run = PolicyRun("chunked", "+ chunked prefill", requests=[
        RequestRun(0, 0.0, 4, 3, started_s=0.0, first_s=0.1, token_s=[0.1, 0.2, 0.3]),
        RequestRun(1, 0.0, 40, 2, started_s=0.1, first_s=0.3, token_s=[0.3, 0.4])],
        steps=[StepRun("prefill", 0.0, 0.1, [0], [(0, 0, 4)]), StepRun("decode", 0.1, 0.2, [0, 1], [(1, 0, 20)]),
               StepRun("decode", 0.2, 0.3, [0, 1], [(1, 20, 20)]), StepRun("decode", 0.3, 0.4, [1])])
    waiting, prefill, decode = fig_traffic.timeline_figure(run).data
    assert prefill.name == "prefill chunk" and list(prefill.y) == ["#1", "#2", "#2"]
    assert list(decode.y) == ["#1", "#1", "#2"]
    assert prefill.text[1] == "1 rider(s): #1<br>prefill chunk: #2 prompt tokens 1–20"
    assert prefill.text[2].endswith("#2 prompt tokens 21–40")
    assert tt.timeline_help(run) == tt.CHUNKED_HELP and tt.timeline_help(_run().policies[1]) == tt.TIMELINE_HELP


def test_disaggregation_on_one_machine_says_what_a_device_per_side_changes():
    run = _run()
    assert tt.DISAGGREGATION_NOTE not in tt.findings(run, SLO(0.25, 0.1))  # not run: not said
    split = PolicyRun("disaggregated", "disaggregated", requests=run.policies[1].requests, steps=run.policies[1].steps)
    run.policies.append(split)
    words = tt.findings(run, SLO(0.25, 0.1))
    assert tt.DISAGGREGATION_NOTE in words
    for needed in ("one memory bus", "DistServe", "Zhong et al., OSDI 2024", "a device per side"):
        assert needed in tt.DISAGGREGATION_NOTE
    assert "never stops for a prompt" not in tt.LANES_HELP and "same device" in tt.LANES_HELP
