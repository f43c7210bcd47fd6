"""The roofline and budget labs' numbers: this machine's measured peaks, the cards, where a prefill share comes from
(a measured run, the card model's estimate, the fable) and Amdahl's verdict. Streamlit-free; the arithmetic lives in
engine/perfmodel (the card model: card_model.py), this module only picks and words it for the pages.
"""
from __future__ import annotations

from engine.core.metrics import summarize
from engine.errors import EngineError
from engine.perfmodel import budget
from engine.perfmodel import card_model as cm
from engine.perfmodel import cards as cd
from engine.perfmodel import roofline as rl
from engine.perfmodel.budget import BudgetResult
from ui.text import card_numbers as cn
from ui.text import runs

# the presets the pages offer (spec sheets, engine/perfmodel/cards.py; models, engine/perfmodel/model_shapes.py)
HARDWARE_PRESETS = rl.HARDWARE_PRESETS
MODEL_PRESETS = rl.MODEL_PRESETS
WORKLOAD_PRESETS = rl.WORKLOAD_PRESETS
FABLE_SHARE, FABLE_SCENARIOS = budget.FABLE_SHARE, budget.FABLE_SCENARIOS

INTRO = (
    "A **roofline** says how fast a pass can run on a machine: at most its peak FLOP/s, and at most its arithmetic "
    "intensity (FLOPs per byte moved) × memory bandwidth. The corner is the **ridge point**. A prefill reads every "
    "weight once for T·B tokens and does 2 FLOPs (a multiply-add) with it for each, so its intensity is about **2·T·B "
    "÷ bytes per weight** (T·B in bf16, T·B/2 in float32): it is compute-bound only once that passes the ridge (on a "
    "CPU's vector units from a few tokens; on an H100 in bf16 from a few hundred). A decode step reads every weight, and "
    "every rider's KV cache, for one token per rider: its intensity is about 2·B ÷ bytes per weight, so in bf16 it stays "
    "memory-bound below a batch about the size of the ridge (in float32 twice that), and with a long cache it may never "
    "cross.")
CARD_MODEL_NOTE = (
    "**How the cards' times are estimated** (engine/perfmodel/card_model.py): each pass takes the larger, softly, of "
    "FLOPs ÷ (the card's achievable matmul FLOP/s × MFU) and bytes ÷ (bandwidth × MBU), plus the host's launch time "
    "where the device finishes first, plus a fixed per-pass cost. MFU, MBU and the overheads belong to the card's class, "
    "fitted on published measurements and checked on others held back (docs/performance-model.md). Spec sheets, not "
    "measured here: estimates.")


def share_in_words(share: float) -> str:
    """0.2 -> 'a fifth', 0.25 -> 'a quarter', 0.5 -> 'half'; any other share as a percentage."""
    for n, word in ((2, "half"), (3, "a third"), (4, "a quarter"), (5, "a fifth"), (10, "a tenth")):
        if abs(share - 1 / n) < 1e-9:
            return word
    return f"{share:.0%}"


FABLE_NOTE = f"the fable: the valley is {share_in_words(FABLE_SHARE)} of the journey"


# --- roofline lab -----------------------------------------------------------------------------------------------
def peak_metrics(peaks) -> list[tuple[str, str]]:
    """(label, value) for this machine's measured peaks and the ridge point they make."""
    return [("Copy bandwidth (measured, read + write)", f"{peaks.copy_bytes_per_s / 1e9:.1f} GB/s"),
            ("Matmul FLOP/s (measured)", f"{peaks.matmul_flops_per_s / 1e9:.1f} GFLOP/s"),
            ("Ridge point (matmul ÷ copy)", f"{peaks.matmul_flops_per_s / peaks.copy_bytes_per_s:.1f} FLOP/byte")]


def trace_points(trace) -> list[rl.MeasuredPoint]:
    """The run's prefill and decode points on the roofline (measured times, estimated FLOPs and bytes)."""
    return rl.trace_points(trace)


def hardware_caption(hw_name: str) -> str:
    hw = HARDWARE_PRESETS[hw_name]
    card = cd.card(hw.key)
    note = f" Note: {card.note}." if card.note else ""
    return (f"{hw_name}: {hw.flops_per_s / 1e12:g} TFLOP/s, {hw.bytes_per_s / 1e9:g} GB/s, ridge "
            f"{hw.ridge:.0f} FLOP/byte ({hw.source}).{note} Times on it are estimates of the card model.")


def class_table() -> list[dict]:
    """Every device class's efficiencies and overheads, each with its range and source (the card model's inputs)."""
    rows = []
    for c in cd.CLASSES.values():
        for name, p in c.params().items():
            shown = (lambda v: f"{v * 1e6:.0f} µs") if name.endswith("_s") else (lambda v: f"{v:.2f}")
            rows.append({"class": c.name, "parameter": name, "value": shown(p.value),
                         "range": f"{shown(p.low)} - {shown(p.high)}", "source": p.source})
    o = cd.OVERLAP
    rows.append({"class": "all", "parameter": "overlap", "value": f"{o.value:.2f}", "range": f"{o.low:.2f} - {o.high:.2f}",
                 "source": o.source})
    return rows


# --- budget lab -------------------------------------------------------------------------------------------------
def measured_share(trace) -> tuple[float, str] | None:
    """The prefill share of the session's last run and where it comes from (measured here, over HTTP, or a recording
    read from a file); None without a finished run."""
    if trace is None or trace.total_seconds <= 0:
        return None
    s = summarize(trace)
    return s.prefill_share, (f"{runs.origin_words(trace)}: TTFT {s.ttft_s * 1e3:.0f} ms of {s.total_s * 1e3:.0f} ms end to end "
                             f"({trace.n_prompt} in / {trace.n_output} out, {trace.model})")


def preset_share(model_name: str, hw_name: str, workload_name: str) -> tuple[float, str]:
    """The prefill share of one request's time the card model estimates for a preset model, card and workload (bf16,
    batch 1; where the model is too big for one card, the fewest cards that hold it)."""
    wl = WORKLOAD_PRESETS[workload_name]
    gpus = 1
    while True:
        s = cn.setup(model_name, HARDWARE_PRESETS[hw_name].key, "float16", gpus)
        try:
            p = cm.plan(s, wl.prompt_tokens, wl.output_tokens)
            break
        except EngineError as e:
            if gpus >= 8 or not s.card.link_bytes_per_s > 0:
                return FABLE_SHARE, f"{e}: the fable's share instead ({share_in_words(FABLE_SHARE)})"
            gpus *= 2
    cards = f"{gpus} x {hw_name}" if gpus > 1 else hw_name
    return p.prefill_share, (f"estimate: TTFT {p.ttft_s * 1e3:.0f} ms of {p.total_s:.2f} s for {wl.prompt_tokens} in / "
                             f"{wl.output_tokens} out on {cards} (the card model)")


def amdahl(share: float, prefill_speedup: float, decode_speedup: float) -> BudgetResult:
    """End-to-end effect of speeding up each segment (engine/perfmodel/budget.py)."""
    return budget.amdahl(share, prefill_speedup, decode_speedup)


def fable() -> dict[str, BudgetResult]:
    """The fable's budgets, each with its verdict."""
    return budget.fable()
