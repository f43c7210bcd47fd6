"""The fleet planner's numbers and words: a card's step times from the card model, the plan per policy, the bill by
stage, which card for which stage, and what is estimated and what is measured here. Streamlit-free; the arithmetic is
engine/perfmodel's (the card model: card_model.py; the simulator: fleet_sim.py; the search: planner.py).
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from engine.errors import EngineError
from engine.perfmodel import budget
from engine.perfmodel import card_model as cm
from engine.perfmodel import cards as cd
from engine.perfmodel import roofline as rl
from engine.perfmodel.goodput import SLO, percentile
from engine.perfmodel.planner import Plan, plan
from engine.perfmodel.step_model import CardStepModel
from engine.perfmodel.workload import PRESETS, Lengths, Workload, arrivals
from ui.text import card_numbers as cn

MODELS = rl.MODEL_PRESETS
WORKLOADS = PRESETS
DEFAULT_MODEL = "Llama-2 7B (MHA, 32 KV heads)"
POLICY_NAMES = {"batch": "colocated, continuous batching", "chunked": "colocated + chunked prefill",
                "disagg": "disaggregated: prefill cards + decode cards"}
# example prices per card-hour for the inputs' defaults: not quotes from any provider — set your own
EXAMPLE_PRICES = {"NVIDIA A100 80GB SXM": 1.8, "NVIDIA H100 SXM": 2.5, "NVIDIA H200 SXM": 3.5, "NVIDIA L4": 0.7,
                  "NVIDIA L40S": 1.0, "NVIDIA RTX 4090": 0.6, "Apple M3 Max (40-core GPU)": 0.4,
                  "Laptop CPU (8 cores, DDR5-5600)": 0.1}
SAME = "same as the prefill cards"

INTRO = (
    "Old Qin's budget asked which segment gets the money for **one** convoy. A buyer serves thousands of requests a "
    "second, and the answer turns on queueing and batching. This planner simulates a fleet of cards — colocated "
    "(each card does both bends) or split into **valley cards** (prefill) and **bridge cards** (decode), which may be "
    "different cards (Splitwise's idea), with the KV cache carried between them — and searches for the cheapest fleet "
    "whose requests meet both SLOs (90 % of them, DistServe's attainment).")

HONESTY = (
    "**Estimated**: every card's step times come from the card model (engine/perfmodel/card_model.py) — its spec sheet "
    "times its class's efficiencies, fitted on published GPU measurements and checked on others held back "
    "(docs/performance-model.md). **Measured here**: this machine's card, once its peaks are measured in this session "
    "(button below, or the Roofline page), and when. **Simulated**: the queueing and batching of thousands of requests "
    "(engine/perfmodel/fleet_sim.py; `python -m benchmarks.fleet_check` checks the simulator against the real engine "
    "on this machine and prints the comparison). Nothing on this page is read from a file recorded on another machine.")


def example_price(card_name: str) -> float:
    return EXAMPLE_PRICES.get(card_name, 0.1 if card_name.startswith("this machine") else 1.0)


def instance(model_name: str, card: cd.Card, dtype: str = "float16") -> cm.Setup:
    """One serving instance: the fewest cards (1, 2, 4, 8) of this kind that hold the model's weights."""
    the_dtype = "float32" if card.device_class == "cpu" else dtype
    gpus, last = 1, None
    while gpus <= 8:
        s = cn.setup(model_name, card, the_dtype, gpus)
        try:
            return s.check()
        except EngineError as e:
            last = e
            if not card.link_bytes_per_s > 0 or "does not fit" not in str(e):
                break
            gpus *= 2
    raise last


def card_model(model_name: str, card: cd.Card, dtype: str = "float16") -> CardStepModel:
    return CardStepModel(instance(model_name, card, dtype))


def workload_of(name: str, prompt_mean: int = 256, output_mean: int = 128) -> Workload:
    """A preset, or "custom": log-normal lengths (spread 0.5) around the given means."""
    if name == "custom":
        return Workload(Lengths(int(prompt_mean), 0.5, 1, 8 * max(int(prompt_mean), 1)),
                        Lengths(int(output_mean), 0.5, min(1, int(output_mean)), 8 * max(int(output_mean), 1)), name="custom")
    return WORKLOADS[name]


def plans(workload: Workload, rate: float, n: int, slo: SLO, model, price: float, policies: list[str],
          max_batch: int, token_budget: int, link_gb_s: float, seed: int = 0, decode_model=None,
          decode_price: float | None = None) -> dict[str, Plan]:
    """Every policy's cheapest fleet; `price` per instance-hour (an instance: the cards that hold one copy)."""
    reqs = arrivals(dataclasses.replace(workload, request_rate=rate, num_requests=n), seed)
    args = dict(max_batch=max_batch, token_budget=token_budget, link_bytes_per_s=link_gb_s * 1e9)
    return {p: plan(reqs, model, slo, price, p, decode_model=decode_model, decode_price_per_hour=decode_price, **args)
            for p in policies}


def plan_table(plans_by_policy: dict[str, Plan]) -> pd.DataFrame:
    rows = []
    for policy, p in plans_by_policy.items():
        f, out = p.fleet, p.result.outcomes
        util = p.result.utilisation()
        rows.append({
            "policy": POLICY_NAMES[policy],
            "instances": str(f.cards) if policy != "disagg" else f"{f.cards} ({f.prefill} prefill + {f.decode} decode)",
            "meets SLOs": f"{p.attainment:.0%}" + ("" if p.meets else " (short of 90 %)"),
            "goodput req/s": round(p.goodput, 1),
            "TTFT p90 ms": round(percentile([o.ttft_s for o in out], 90) * 1e3, 1),
            "TPOT p90 ms": round(percentile([o.tpot_s for o in out], 90) * 1e3, 2),
            "busy": ", ".join(f"{k} {v:.0%}" for k, v in util.items()),
            "cost per M tokens": round(p.cost_per_million, 4),
            "valley's share of the bill": f"{p.money['prefill']:.0%}",
        })
    return pd.DataFrame(rows)


def cheapest(plans_by_policy: dict[str, Plan]) -> tuple[str, Plan] | None:
    ok = [(k, p) for k, p in plans_by_policy.items() if p.meets]
    return min(ok, key=lambda kp: kp[1].cost_per_million) if ok else None


def ledger_text(p: Plan, hw_name: str) -> str:
    """Beside Old Qin's ledger: the fable's one-convoy valley share (of time) against this fleet's bill (of money)."""
    share = p.money["prefill"]
    stage = ("the valley: FLOP/s for prompts past the ridge (a card with more compute per dollar)" if share >= 0.5
             else "the bridge: bandwidth and memory (a card with more bytes/s and room for KV caches per dollar)")
    return (f"**The bill by stage:** the valley (prefill) takes **{share:.0%}** of the money, the bridge (decode) "
            f"**{1 - share:.0%}** on {hw_name}. Old Qin's ledger put the valley at {budget.FABLE_SHARE:.0%} of one "
            f"convoy's journey — a share of time; this is a share of device-seconds billed, with the riders sharing each "
            f"decode step. The money goes to {stage}.")


def workload_caption(w: Workload) -> str:
    return (f"{w.name}: prompts ~{w.prompt.mean} tokens, outputs ~{w.output.mean} (log-normal), Poisson arrivals "
            "(engine/perfmodel/workload.py)")


def fleet_words(p: Plan) -> str:
    f = p.fleet
    if f.policy == "disagg":
        return f"{f.prefill} valley (prefill) + {f.decode} bridge (decode) instances"
    return f"{f.cards} instances"


def run_planner(workload: Workload, rate: float, n: int, ttft_ms: float, tpot_ms: float, model_name: str,
                card: str, price: float, policies: list[str], max_batch: int, budget: int, link_gb_s: float,
                decode_card: str = SAME, decode_price: float | None = None, peaks=None, dtype: str = "float16",
                trace=None):
    """Every policy's plan, or one line saying what was wrong (EngineError's own words). `decode_card`: a split fleet's
    decode cards when another kind than the prefill ones; prices are per card-hour."""
    try:
        if not policies:
            raise EngineError("pick at least one policy to plan")
        slo = SLO(ttft_ms / 1e3, tpot_ms / 1e3)
        choices = cn.cards_with(peaks, trace)  # this machine's measured card first, then the spec sheets
        if card not in choices:
            raise EngineError(f"unknown card '{card}'; valid: {', '.join(choices)}")
        model = card_model(model_name, choices[card], dtype)
        other = None if decode_card in (SAME, card, None) else decode_card
        if other is not None and other not in choices:
            raise EngineError(f"unknown card '{other}'; valid: {', '.join(choices)}")
        decode_model = card_model(model_name, choices[other], dtype) if other else None
        g = model.setup.gpus
        dg = decode_model.setup.gpus if decode_model else g
        found = plans(workload, rate, n, slo, model, price * g, policies, max_batch, budget, link_gb_s,
                      decode_model=decode_model, decode_price=(decode_price if decode_price is not None else price) * dg
                      if decode_model else None)
    except EngineError as exc:
        return str(exc)
    words = [f"{model_name} on {card}" + (f" ({g} cards an instance)" if g > 1 else "") + f" — {model.source}."]
    if decode_model:
        words.append(f"Decode cards: {other}" + (f" ({dg} an instance)" if dg > 1 else "") + f" — {decode_model.source}.")
    return {"plans": found, "card": card if not other else f"{card} (prefill) and {other} (decode)",
            "step_model": " ".join(words)}


def stage_cards(model_name: str, workload: Workload, prices: dict[str, float], peaks=None,
                dtype: str = "float16", trace=None) -> pd.DataFrame:
    """Which card for which stage (the card model, no simulation): each card's prefill and decode money per thousand
    requests of the workload's mean lengths, a prefill alone and a decode step among up to 64 riders."""
    return cn.stage_cards(model_name, max(workload.prompt.mean, 1), max(workload.output.mean, 1), prices, 64, dtype,
                          cn.cards_with(peaks, trace))


def stage_words(table: pd.DataFrame) -> str:
    """The cheapest card for each stage in the table, or why there is none."""
    pre, dec = "prefill per 1k requests", [c for c in table.columns if c == "decode per 1k requests"]
    if pre not in table.columns or not dec:
        return "Set a price per card-hour to compare the cards' money per stage."
    ok = table.dropna(subset=[pre, dec[0]])
    if ok.empty:
        return "No card holds this model."
    best_pre = ok.loc[ok[pre].idxmin(), "card"]
    best_dec = ok.loc[ok[dec[0]].idxmin(), "card"]
    same = " — the same card for both" if best_pre == best_dec else " — a split fleet may give each stage its own card"
    return (f"**Which card for which stage** (estimates at these prices): the cheapest valley is **{best_pre}**, the "
            f"cheapest bridge **{best_dec}**{same}.")
