"""The fleet simulator against queueing numbers computed by hand, and the engine's scheduler rules."""
import math

import pytest

from engine.errors import EngineError
from engine.perfmodel.fleet_sim import Fleet, simulate
from engine.perfmodel.step_model import StepModel
from engine.perfmodel.workload import Arrival, Lengths, Workload, arrivals

FLAT = StepModel(0.01, 0.001, 0.0, 1.0)  # a step: 10 ms + 1 ms per token computed


def test_one_replica_deterministic_arrivals_queue_like_d_d_1():
    """Service S = 10 + 1*40 = 50 ms, arrivals every 30 ms: request k waits k*(S - gap) (hand-computed)."""
    reqs = [Arrival(0.03 * k, 40, 1) for k in range(5)]
    result = simulate(reqs, FLAT, Fleet("batch"))
    for k, o in enumerate(result.outcomes):
        assert o.ttft_s == pytest.approx(0.05 + k * 0.02)
        assert o.tpot_s is None and o.output_tokens == 1
    assert result.busy_s["colocated"] == pytest.approx(0.25)


def test_under_capacity_nobody_waits():
    reqs = [Arrival(0.1 * k, 40, 1) for k in range(5)]
    assert [o.ttft_s for o in simulate(reqs, FLAT, Fleet("batch")).outcomes] == pytest.approx([0.05] * 5)


def test_poisson_arrivals_match_pollaczek_khinchine():
    """M/D/1: mean wait = rho*S / (2(1 - rho)); with S = 50 ms and rho = 0.6 that is 37.5 ms."""
    rate = 0.6 / 0.05
    work = Workload(Lengths(40), Lengths(1), request_rate=rate, num_requests=20000)
    outcomes = simulate(arrivals(work, seed=1), FLAT, Fleet("batch")).outcomes
    mean_wait = sum(o.ttft_s - 0.05 for o in outcomes) / len(outcomes)
    assert mean_wait == pytest.approx(0.6 * 0.05 / (2 * 0.4), rel=0.08)


def test_batch_rules_match_the_engine_loop():
    """Admit (prefill alone), one step, admit, one step: the order continuous_batch's loop runs."""
    result = simulate([Arrival(0, 10, 3), Arrival(0, 10, 3)], FLAT, Fleet("batch"))
    a, b = result.outcomes
    # a: prefill 20 ms -> step (1 rider) 11 ms -> b's prefill 20 ms -> step (2 riders) 12 ms: a's last token at 63 ms
    assert (a.ttft_s, a.finished_s) == pytest.approx((0.02, 0.063))
    assert (b.ttft_s, b.finished_s) == pytest.approx((0.051, 0.074))
    assert b.tpot_s == pytest.approx((0.074 - 0.051) / 2)


def test_chunked_prefill_shares_steps_with_riders():
    """Budget 8: the rider's token + a 7-token chunk, then the last 3 prompt tokens give the first token."""
    result = simulate([Arrival(0, 2, 3), Arrival(0.005, 10, 2)], FLAT, Fleet("chunked", token_budget=8))
    a, b = result.outcomes
    assert a.ttft_s == pytest.approx(0.012)  # both of a's prompt tokens in one step: 10 + 2 ms
    # b arrives during that step; next step: a decodes (1) + b's first 7 tokens = 18 ms, then a (1) + b (3) = 14 ms
    assert b.ttft_s == pytest.approx(0.012 + 0.018 + 0.014 - 0.005)
    assert a.finished_s == pytest.approx(0.044)


def test_disaggregated_handover_takes_the_link_time():
    model = StepModel(0.01, 0.001, 0.0, 1000.0)  # 1000 bytes of KV per token
    fleet = Fleet("disagg", prefill=1, decode=1, link_bytes_per_s=1e6)
    (o,) = simulate([Arrival(0, 100, 2)], model, fleet).outcomes
    # prefill 110 ms; 100 tokens x 1000 B over 1 MB/s = 100 ms; one decode step 11 ms
    assert o.ttft_s == pytest.approx(0.11)
    assert o.finished_s == pytest.approx(0.11 + 0.1 + 0.011)


def test_replicas_share_the_load():
    reqs = [Arrival(0, 40, 1) for _ in range(4)]
    one = simulate(reqs, FLAT, Fleet("batch", replicas=1)).outcomes
    four = simulate(reqs, FLAT, Fleet("batch", replicas=4)).outcomes
    assert max(o.ttft_s for o in one) == pytest.approx(0.2)
    assert max(o.ttft_s for o in four) == pytest.approx(0.05)


@pytest.mark.parametrize("fleet, words", [
    (Fleet("batch", replicas=0), "replicas"),
    (Fleet("disagg", prefill=0, decode=0), "0 cards"),
    (Fleet("chunked", token_budget=4), "token budget"),
    (Fleet("disagg", link_bytes_per_s=math.nan), "link"),
    (Fleet("nope"), "policy"),
])
def test_bad_fleets_get_one_line(fleet, words):
    with pytest.raises(EngineError, match=words) as err:
        simulate([Arrival(0, 4, 2)], FLAT, fleet)
    assert "\n" not in str(err.value)


def test_a_pool_of_zero_that_is_needed_is_one_line():
    with pytest.raises(EngineError, match="decode pool, which has 0"):
        simulate([Arrival(0, 4, 3)], FLAT, Fleet("disagg", prefill=1, decode=0))


def test_chunked_takes_one_joiner_a_step_like_the_engine_loop():
    """Two prompts wait while a step runs: the first takes a row at the next step, the second at the one after."""
    reqs = [Arrival(0, 4, 1), Arrival(0.001, 4, 1), Arrival(0.001, 4, 1)]
    _, b, c = simulate(reqs, FLAT, Fleet("chunked", token_budget=8)).outcomes
    assert b.ttft_s == pytest.approx(0.028 - 0.001)  # steps of 10 ms + 4 tokens: 0-14, 14-28
    assert c.ttft_s == pytest.approx(0.042 - 0.001)  # not 0.032 (both joining one 8-token step)


def test_a_split_fleets_decode_pool_runs_on_its_own_cards():
    """Splitwise's idea: the decode cards' step model times the decode pool; the prefill pool keeps its own."""
    from engine.perfmodel import card_model as cm
    from engine.perfmodel.cards import card
    from engine.perfmodel.model_shapes import model_shape
    from engine.perfmodel.step_model import CardStepModel

    cfg = model_shape("llama-3.1-8b").config
    h100 = CardStepModel(cm.Setup(cfg, card("h100-sxm"), "float16"))
    h200 = CardStepModel(cm.Setup(cfg, card("h200"), "float16"))
    reqs = [Arrival(0.05 * i, 512, 64) for i in range(20)]
    same = simulate(reqs, h100, Fleet("disagg", prefill=1, decode=1))
    split = simulate(reqs, h100, Fleet("disagg", prefill=1, decode=1), decode_model=h200)
    ttft = [o.ttft_s for o in same.outcomes], [o.ttft_s for o in split.outcomes]
    assert ttft[0] == pytest.approx(ttft[1])  # the first token comes out of the prefill pool: unchanged
    assert split.busy_s["decode"] < 0.9 * same.busy_s["decode"]  # the bridge on more bandwidth
    assert split.busy_s["prefill"] == pytest.approx(same.busy_s["prefill"])
    with pytest.raises(EngineError, match="split fleet"):
        simulate(reqs, h100, Fleet("batch"), decode_model=h200)
    other = CardStepModel(cm.Setup(model_shape("llama-2-7b").config, card("h200"), "float16"))
    with pytest.raises(EngineError, match="same model"):
        simulate(reqs, h100, Fleet("disagg"), decode_model=other)
