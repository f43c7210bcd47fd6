"""Which stage eats the money: the cheapest fleet that serves a workload within its SLOs, and its bill by stage.

For a policy the planner searches fleet sizes (colocated: how many replicas; disaggregated: how many
prefill and how many decode cards, DistServe's placement question) with the simulator, and keeps the
cheapest fleet whose SLO attainment (the share of requests meeting both TTFT and TPOT objectives) reaches
the target — DistServe's 90 % by default. In a split fleet TTFT depends on the prefill pool alone (the first
token comes out of it), so that pool is sized first, then the decode pool. Cost per million tokens (prompt +
output) comes from a price per card-hour over the time the traffic arrived (the fleet serves that rate as long as
it lasts: a finite sample's drain at the end is not billed, so fleets compare by their cards). The bill is split
by stage: a split fleet's pools by their cards' prices (the decode pool may be another kind of card, Splitwise's
idea), a colocated card's time by the seconds its steps spent on each.
"""
from __future__ import annotations

import dataclasses
import math

from engine.errors import EngineError
from engine.perfmodel.card_model import smallest
from engine.perfmodel.fleet_sim import Fleet, SimResult, simulate
from engine.perfmodel.goodput import SLO, goodput
from engine.perfmodel.step_model import StepModel
from engine.perfmodel.workload import Arrival

TARGET = 0.9  # share of requests that must meet both objectives (DistServe's attainment target)


@dataclasses.dataclass(frozen=True)
class Plan:
    fleet: Fleet
    result: SimResult
    attainment: float  # share of requests meeting both SLOs
    goodput: float  # requests/s meeting both
    cost_per_million: float  # currency per million tokens (prompt + output)
    money: dict  # "prefill" / "decode" -> share of the bill (sums to 1)
    meets: bool  # attainment >= target


def check_price(price_per_hour: float) -> None:
    if not (isinstance(price_per_hour, (int, float)) and math.isfinite(price_per_hour) and price_per_hour >= 0):
        raise EngineError(f"the price per card-hour must be a finite number >= 0, not {price_per_hour!r}")


def attainment(result: SimResult, slo: SLO) -> float:
    return sum(o.meets(slo) for o in result.outcomes) / len(result.outcomes)


def ttft_attainment(result: SimResult, slo: SLO) -> float:
    return sum(o.ttft_s is not None and o.ttft_s <= slo.ttft_s for o in result.outcomes) / len(result.outcomes)


def bill(result: SimResult, price_per_hour: float, decode_price_per_hour: float | None = None) -> tuple[float, dict]:
    """Cost per million tokens, and the bill's share per stage (a split fleet's decode cards may cost another price)."""
    check_price(price_per_hour)
    decode_price = price_per_hour if decode_price_per_hour is None else decode_price_per_hour
    check_price(decode_price)
    arrived = [o.arrived_s for o in result.outcomes]
    span = max(arrived) - min(arrived) or result.span_s  # steady traffic: the sample's drain is not billed
    tokens = result.prompt_tokens + sum(o.output_tokens for o in result.outcomes)
    if result.fleet.policy == "disagg":
        p = result.instances["prefill"] * price_per_hour
        d = result.instances["decode"] * decode_price
        dollars = (p + d) * span / 3600.0
        money = {"prefill": p / (p + d), "decode": d / (p + d)} if p + d > 0 else {"prefill": 0.0, "decode": 0.0}
    else:
        dollars = result.fleet.cards * span / 3600.0 * price_per_hour
        total = result.stage_s["prefill"] + result.stage_s["decode"]
        share = result.stage_s["prefill"] / total if total > 0 else 0.0  # idle time split like busy time
        money = {"prefill": share, "decode": 1.0 - share}
    return (dollars / tokens * 1e6 if tokens else math.nan), money


def evaluate(arrivals: list[Arrival], model: StepModel, fleet: Fleet, slo: SLO, price_per_hour: float,
             target: float = TARGET, decode_model: StepModel | None = None,
             decode_price_per_hour: float | None = None) -> Plan:
    result = simulate(arrivals, model, fleet, decode_model if fleet.policy == "disagg" else None)
    per_million, money = bill(result, price_per_hour, decode_price_per_hour if fleet.policy == "disagg" else None)
    share = attainment(result, slo)
    return Plan(fleet, result, share, goodput(result.outcomes, slo), per_million, money, share >= target)


def plan(arrivals: list[Arrival], model: StepModel, slo: SLO, price_per_hour: float, policy: str = "batch",
         target: float = TARGET, max_cards: int = 256, decode_model: StepModel | None = None,
         decode_price_per_hour: float | None = None, **fleet_args) -> Plan:
    """The cheapest fleet for `policy` reaching `target` attainment; if none up to max_cards, the largest tried.
    `decode_model`, `decode_price_per_hour`: a split fleet's decode cards, when another kind than the prefill ones."""
    slo.check()
    check_price(price_per_hour)
    if not (0 < target <= 1):
        raise EngineError(f"the attainment target must be a share in (0, 1], not {target!r}")
    if not isinstance(max_cards, int) or max_cards < 1:
        raise EngineError(f"the largest fleet to try must be a whole number of cards >= 1, not {max_cards!r}")
    cache: dict[Fleet, Plan] = {}

    def run(fleet: Fleet) -> Plan:
        if fleet not in cache:
            cache[fleet] = evaluate(arrivals, model, fleet, slo, price_per_hour, target, decode_model=decode_model,
                                    decode_price_per_hour=decode_price_per_hour)
        return cache[fleet]

    if policy != "disagg":
        make = lambda n: Fleet(policy, replicas=n, **fleet_args)  # noqa: E731
        n = smallest(lambda n: run(make(n)).meets, 1, max_cards)
        return run(make(n if n is not None else max_cards))
    needs_prefill = any(a.prompt_tokens > 1 for a in arrivals)  # a one-token prompt goes straight to decode
    needs_decode = any(a.output_tokens > (1 if a.prompt_tokens > 1 else 0) for a in arrivals)
    make = lambda p, d: Fleet("disagg", prefill=p, decode=d, **fleet_args)  # noqa: E731
    p_low = 1 if needs_prefill or not needs_decode else 0
    d_probe = 1 if needs_decode else 0
    p = smallest(lambda p: ttft_attainment(run(make(p, d_probe)).result, slo) >= target, p_low, max_cards)
    p = p_low if p is None else p
    best = None
    while p + (1 if needs_decode else 0) <= max_cards:
        d = smallest(lambda d, p=p: run(make(p, d)).meets, d_probe, max_cards - p) if needs_decode else 0
        if d is not None and run(make(p, d)).meets:
            return run(make(p, d))
        best = run(make(p, max_cards - p if needs_decode else 0))
        if p >= max_cards - 1 or not needs_prefill:
            break
        p += max(1, p // 4)  # the decode pool alone could not do it: the TPOT misses came with the TTFT misses
    return best if best is not None else run(make(max(p_low, 1), d_probe))
