"""The fleet planner's numbers and words: this machine's recorded calibration, a card's step model, the plan per
policy, and what is measured, fitted and extrapolated. Streamlit-free; the arithmetic is engine/perfmodel's.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd

from engine.errors import EngineError
from engine.perfmodel import budget
from engine.perfmodel import roofline as rl
from engine.perfmodel import step_model as sm
from engine.perfmodel.goodput import SLO, percentile
from engine.perfmodel.planner import Plan, plan
from engine.perfmodel.workload import PRESETS, Lengths, Workload, arrivals

# written by scripts/fleet_check.py --save (SmolLM2, this machine)
CALIBRATION = Path(__file__).resolve().parents[2] / "assets" / "fleet_check.json"
HARDWARE = rl.HARDWARE_PRESETS
MODELS = rl.MODEL_PRESETS
WORKLOADS = PRESETS
DEFAULT_MODEL = "Llama-2 7B (MHA, 32 KV heads)"
POLICY_NAMES = {"batch": "colocated, continuous batching", "chunked": "colocated + chunked prefill",
                "disagg": "disaggregated: prefill cards + decode cards"}
DEFAULT_PRICES = {"NVIDIA A100 80GB SXM": 1.8, "NVIDIA H100 SXM": 2.5, "NVIDIA H200 SXM": 3.5, "NVIDIA L4": 0.7,
                  "NVIDIA RTX 4090": 0.6, "Apple M3 Max (40-core GPU)": 0.4, "Laptop CPU (8 cores, DDR5-5600)": 0.1}

INTRO = (
    "Old Qin's budget asked which segment gets the money for **one** convoy. A buyer serves thousands of requests a "
    "second, and the answer turns on queueing and batching. This planner simulates a fleet of cards — colocated "
    "(each card does both bends) or split into **valley cards** (prefill) and **bridge cards** (decode) with the KV "
    "cache carried between them — and searches for the cheapest fleet whose requests meet both SLOs "
    "(90 % of them, DistServe's attainment).")

HONESTY = (
    "**Measured** (this machine): the engine's prefill passes and decode steps, and the check below — the same "
    "arrivals on the real engine and on the simulator. **Fitted**: a step time = fixed + per token computed + per KV "
    "byte read, by least squares on those steps; the efficiencies it implies (share of this machine's peak FLOP/s "
    "and bandwidth). **Extrapolated**: everything on another card, another model, at thousands of requests per "
    "second — the card's spec sheet times this machine's efficiencies. No GPU was measured: treat card counts "
    "and costs as estimates, and the split between stages as the lesson.")


@dataclasses.dataclass(frozen=True)
class Calibration:
    efficiency: sm.Efficiency
    fit: sm.StepModel | None  # None: no calibration recorded, spec-sheet defaults
    residuals: list  # (kind, tokens, measured s, fitted s)
    rows: list  # the check: (workload, metric, engine, sim)
    note: str


def load_calibration(path=None) -> Calibration:
    """This machine's recorded fit and check, or the roofline lab's default efficiencies when none is recorded."""
    path = path or CALIBRATION
    if not path.exists():
        eff = sm.Efficiency(rl.DEFAULT_MFU, rl.DEFAULT_BW_EFF, rl.DEFAULT_BW_EFF)
        return Calibration(eff, None, [], [], "no calibration recorded on this machine yet "
                           "(run `scripts/fleet_check.py --save`): the roofline lab's default efficiencies, "
                           f"{rl.DEFAULT_MFU:.0%} of peak FLOP/s and {rl.DEFAULT_BW_EFF:.0%} of bandwidth (estimates)")
    data = json.loads(path.read_text())
    return Calibration(sm.Efficiency(**data["efficiency"]), sm.from_dict(data["fit"]), data.get("residuals", []),
                       data.get("rows", []), data.get("note", "recorded on this machine"))


def card_model(cal: Calibration, model_name: str, hw_name: str, host_ms: float = 0.0) -> sm.StepModel:
    return sm.for_hardware(cal.efficiency, MODELS[model_name], HARDWARE[hw_name], host_s=host_ms / 1e3)


def check_lines(cal: Calibration, tolerance: float = 0.2) -> list[str]:
    """One line per (workload, metric) outside the tolerance: the page says where the simulator misses."""
    out = []
    for workload, metric, engine, simulated in cal.rows:
        err = (simulated - engine) / engine if engine else math.nan
        if not abs(err) <= tolerance:
            out.append(f"{workload} — {metric}: simulator {simulated:.4g} vs engine {engine:.4g} ({err:+.0%})")
    return out


def check_table(cal: Calibration, tolerance: float = 0.2) -> pd.DataFrame:
    rows = []
    for workload, metric, engine, simulated in cal.rows:
        err = (simulated - engine) / engine if engine else math.nan
        rows.append({"workload": workload, "metric": metric, "engine (measured)": engine, "simulator": simulated,
                     "difference": f"{err:+.0%}", "within 20 %": "yes" if abs(err) <= tolerance else "NO"})
    return pd.DataFrame(rows)


def workload_of(name: str, prompt_mean: int = 256, output_mean: int = 128) -> Workload:
    """A preset, or "custom": log-normal lengths (spread 0.5) around the given means."""
    if name == "custom":
        return Workload(Lengths(int(prompt_mean), 0.5, 1, 8 * max(int(prompt_mean), 1)),
                        Lengths(int(output_mean), 0.5, min(1, int(output_mean)), 8 * max(int(output_mean), 1)), name="custom")
    return WORKLOADS[name]


def plans(workload: Workload, rate: float, n: int, slo: SLO, model: sm.StepModel, price: float, policies: list[str],
          max_batch: int, token_budget: int, link_gb_s: float, seed: int = 0) -> dict[str, Plan]:
    reqs = arrivals(dataclasses.replace(workload, request_rate=rate, num_requests=n), seed)
    args = dict(max_batch=max_batch, token_budget=token_budget, link_bytes_per_s=link_gb_s * 1e9)
    return {p: plan(reqs, model, slo, price, p, **args) for p in policies}


def plan_table(plans_by_policy: dict[str, Plan]) -> pd.DataFrame:
    rows = []
    for policy, p in plans_by_policy.items():
        f, out = p.fleet, p.result.outcomes
        util = p.result.utilisation()
        rows.append({
            "policy": POLICY_NAMES[policy],
            "cards": str(f.cards) if policy != "disagg" else f"{f.cards} ({f.prefill} prefill + {f.decode} decode)",
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
    """Beside Old Qin's ledger: the fable's one-convoy valley share against this fleet's bill."""
    share = p.money["prefill"]
    verdict = rl.what_to_pay_for(share)
    return (f"**The bill by stage:** the valley (prefill) takes **{share:.0%}** of the money, the bridge (decode) "
            f"**{1 - share:.0%}** on {hw_name} cards. Old Qin's ledger put the valley at "
            f"{budget.FABLE_SHARE:.0%} of one convoy's journey. What to pay for here: {verdict}.")


def workload_caption(w: Workload) -> str:
    return (f"{w.name}: prompts ~{w.prompt.mean} tokens, outputs ~{w.output.mean} (log-normal), Poisson arrivals "
            "(engine/perfmodel/workload.py)")


def fleet_words(p: Plan) -> str:
    f = p.fleet
    if f.policy == "disagg":
        return f"{f.prefill} valley (prefill) + {f.decode} bridge (decode) cards"
    return f"{f.cards} cards"


def run_planner(cal: Calibration, workload: Workload, rate: float, n: int, ttft_ms: float, tpot_ms: float, model_name: str,
                card: str, price: float, policies: list[str], max_batch: int, budget: int, link_gb_s: float):
    """Every policy's plan, or one line saying what was wrong (EngineError's own words)."""
    try:
        if not policies:
            raise EngineError("pick at least one policy to plan")
        slo = SLO(ttft_ms / 1e3, tpot_ms / 1e3)
        model = card_model(cal, model_name, card)
        found = plans(workload, rate, n, slo, model, price, policies, max_batch, budget, link_gb_s)
    except EngineError as exc:
        return str(exc)
    words = (f"Step model for {model_name} on {card}: {model.fixed_s * 1e3:.2f} ms + {model.per_token_s * 1e6:.3f} "
             f"µs/token + KV reads — {model.source}.")
    return {"plans": found, "card": card, "step_model": words}
