"""The planner: cheapest fleet meeting SLOs, the bill split by stage, and one clear line for bad inputs."""
import math

import pytest

from engine.errors import EngineError
from engine.perfmodel.fleet_sim import Fleet, simulate
from engine.perfmodel.goodput import SLO
from engine.perfmodel.planner import bill, plan
from engine.perfmodel.step_model import StepModel
from engine.perfmodel.workload import Arrival, Lengths, Workload, arrivals

MODEL = StepModel(0.005, 1e-4, 1e-9, 1000.0)
SLOS = SLO(0.5, 0.05)


def _work(prompt, output, rate=50.0, n=200):
    work = Workload(Lengths(prompt, low=0), Lengths(output, low=0), request_rate=rate, num_requests=n)
    return arrivals(work, seed=0)


@pytest.mark.parametrize("policy", ["batch", "chunked", "disagg"])
def test_zero_output_tokens_put_all_cost_on_prefill(policy):
    p = plan(_work(256, 0), MODEL, SLOS, 2.0, policy)
    assert p.meets
    assert p.money == {"prefill": 1.0, "decode": 0.0}


@pytest.mark.parametrize("policy", ["batch", "chunked", "disagg"])
def test_one_token_prompts_put_all_cost_on_decode(policy):
    p = plan(_work(1, 64), MODEL, SLOS, 2.0, policy)
    assert p.meets
    assert p.money == {"prefill": 0.0, "decode": 1.0}


def test_more_traffic_needs_more_cards_and_the_cheapest_is_minimal():
    light = plan(_work(128, 32, rate=5.0), MODEL, SLOS, 2.0, "batch")
    heavy = plan(_work(128, 32, rate=200.0), MODEL, SLOS, 2.0, "batch")
    assert light.meets and heavy.meets and heavy.fleet.cards > light.fleet.cards
    fewer = Fleet("batch", replicas=heavy.fleet.cards - 1)
    result = simulate(_work(128, 32, rate=200.0), MODEL, fewer)
    assert sum(o.meets(SLOS) for o in result.outcomes) / len(result.outcomes) < 0.9


def test_cost_per_million_tokens_by_hand():
    reqs = [Arrival(0.0, 100, 0), Arrival(1.0, 100, 0)]
    result = simulate(reqs, StepModel(0.1, 0.0, 0.0, 1.0), Fleet("batch"))
    per_million, money = bill(result, 3.6)  # one card for the 1 s the traffic arrived, 3.6/h: 0.001 for 200 tokens
    assert per_million == pytest.approx(0.001 / 200 * 1e6)
    assert money["prefill"] == 1.0


@pytest.mark.parametrize("call, words", [
    (lambda: plan(_work(8, 8), MODEL, SLOS, math.nan), "price"),
    (lambda: plan(_work(8, 8), MODEL, SLO(0.0, 0.05), 1.0), "TTFT objective"),
    (lambda: plan(_work(8, 8), MODEL, SLOS, 1.0, max_cards=0), "largest fleet"),
    (lambda: arrivals(Workload(Lengths(8), Lengths(8), request_rate=-1.0)), "request rate"),
    (lambda: simulate(_work(8, 8), MODEL, Fleet("batch", replicas=0)), "replicas"),
])
def test_bad_inputs_get_one_clear_line(call, words):
    with pytest.raises(EngineError, match=words) as err:
        call()
    assert "\n" not in str(err.value)


def test_a_split_fleet_bills_each_pool_at_its_own_price():
    result = simulate(_work(256, 64, rate=5.0, n=50), MODEL, Fleet("disagg", prefill=2, decode=3))
    _, money = bill(result, 1.0, decode_price_per_hour=3.0)
    assert money["prefill"] == pytest.approx(2 / (2 + 9)) and money["decode"] == pytest.approx(9 / 11)
    cost_same, _ = bill(result, 1.0)
    cost_split, _ = bill(result, 1.0, 3.0)
    assert cost_split == pytest.approx(cost_same * 11 / 5)
    with pytest.raises(EngineError, match="price"):
        bill(result, 1.0, -1.0)
