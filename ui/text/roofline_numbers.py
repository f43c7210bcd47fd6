"""The roofline and budget labs' numbers: this machine's measured peaks, spec-sheet presets, where a prefill share
comes from (a measured run, a preset estimate, the fable) and Amdahl's verdict. Streamlit-free; the arithmetic
lives in engine/perfmodel, this module only picks and words it for the pages.
"""
from __future__ import annotations

from engine.core.metrics import summarize
from engine.perfmodel import budget
from engine.perfmodel import roofline as rl
from engine.perfmodel.budget import BudgetResult

# the presets and defaults the pages offer (spec sheets and estimates, engine/perfmodel/roofline.py)
HARDWARE_PRESETS = rl.HARDWARE_PRESETS
MODEL_PRESETS = rl.MODEL_PRESETS
WORKLOAD_PRESETS = rl.WORKLOAD_PRESETS
DEFAULT_MFU, DEFAULT_BW_EFF = rl.DEFAULT_MFU, rl.DEFAULT_BW_EFF
FABLE_SHARE, FABLE_SCENARIOS = budget.FABLE_SHARE, budget.FABLE_SCENARIOS


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
    return [("Copy bandwidth (measured)", f"{peaks.copy_bytes_per_s / 1e9:.1f} GB/s"),
            ("Matmul FLOP/s (measured)", f"{peaks.matmul_flops_per_s / 1e9:.1f} GFLOP/s"),
            ("Ridge point", f"{peaks.matmul_flops_per_s / peaks.copy_bytes_per_s:.1f} FLOP/byte")]


def trace_points(trace) -> list[rl.MeasuredPoint]:
    """The run's prefill and decode points on the roofline (measured times, estimated FLOPs and bytes)."""
    return rl.trace_points(trace)


def hardware_caption(hw_name: str) -> str:
    hw = HARDWARE_PRESETS[hw_name]
    return (f"{hw_name}: {hw.flops_per_s / 1e12:g} TFLOP/s, {hw.bytes_per_s / 1e9:g} GB/s, ridge "
            f"{hw.ridge:.0f} FLOP/byte ({hw.source}). Estimates.")


# --- budget lab -------------------------------------------------------------------------------------------------
def measured_share(trace) -> tuple[float, str] | None:
    """The prefill share of a measured run and where it comes from; None without a finished run."""
    if trace is None or trace.total_seconds <= 0:
        return None
    s = summarize(trace)
    return s.prefill_share, (f"measured: TTFT {s.ttft_s * 1e3:.0f} ms of {s.total_s * 1e3:.0f} ms end to end "
                             f"({trace.n_prompt} in / {trace.n_output} out, {trace.model})")


def preset_share(model_name: str, hw_name: str, workload_name: str) -> tuple[float, str]:
    """The prefill share the roofline predicts for a preset model, hardware and workload (an estimate)."""
    wl = WORKLOAD_PRESETS[workload_name]
    p = rl.predict(MODEL_PRESETS[model_name], HARDWARE_PRESETS[hw_name], wl.prompt_tokens, wl.output_tokens)
    return p.prefill_share, (f"estimate: TTFT {p.ttft_s * 1e3:.0f} ms of {p.total_s:.2f} s for {wl.prompt_tokens} in / "
                             f"{wl.output_tokens} out on {hw_name}")


def amdahl(share: float, prefill_speedup: float, decode_speedup: float) -> BudgetResult:
    """End-to-end effect of speeding up each segment (engine/perfmodel/budget.py)."""
    return budget.amdahl(share, prefill_speedup, decode_speedup)


def fable() -> dict[str, BudgetResult]:
    """The fable's budgets, each with its verdict."""
    return budget.fable()
