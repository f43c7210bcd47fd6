"""The sweep and batch labs' numbers: which lengths fit the model, the TTFT fit, the batch memory guard and the
batch crossover (measured, and predicted from this machine's ridge point). Streamlit-free.

`lm` is the model as the dashboard knows it (the worker's ModelInfo: config, dtype, device, weight bytes).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import dtype_bytes
from engine.errors import EngineError
from engine.labs.sweeps import SweepPoint, SweepResult, check_batch_memory, estimate_batch_memory, measured_crossover, split_allowed
from engine.perfmodel.fit import TTFTFit, fit_ttft
from engine.perfmodel.roofline import predicted_crossover_batch

GIB = 2**30


# --- sweep lab --------------------------------------------------------------------------------------------------
def sweep_plan(lm, kind: str, lengths: list[int], fixed: int) -> tuple[tuple | None, list[str]]:
    """The sweep job's arguments for the lengths that fit the context (None when none does), and why others were skipped.

    kind "prompt": `lengths` are prompt lengths, `fixed` the output tokens; "output": the other way round.
    """
    pairs = [(t, fixed) for t in lengths] if kind == "prompt" else [(fixed, n) for n in lengths]
    allowed, refused = split_allowed(lm, [p for p, _ in pairs], [n for _, n in pairs])
    if not allowed:
        return None, refused
    swept = [t for t, _ in allowed] if kind == "prompt" else [n for _, n in allowed]
    return (swept, fixed), refused


def sweep_progress(partial: SweepResult) -> tuple[str, float]:
    """The progress bar's text and fraction after a sweep's latest point."""
    last = partial.points[-1]
    return (f"{partial.done}/{len(partial.planned)}: {last.prompt_tokens} in, {last.output_tokens} out, "
            f"TTFT {last.ttft_s * 1e3:.0f} ms", partial.done / len(partial.planned))


def ttft_fit(points: list[SweepPoint]) -> TTFTFit | None:
    """TTFT against prompt length, fitted (engine/perfmodel/fit.py); None with too few points."""
    return fit_ttft([p.prompt_tokens for p in points], [p.ttft_s for p in points])


# --- batch lab --------------------------------------------------------------------------------------------------
def batch_memory_caption(lm, batch: int, prompt_tokens: int, output_tokens: int) -> str:
    """The memory estimate for the largest batch asked for, in words."""
    est = estimate_batch_memory(lm, batch, prompt_tokens, output_tokens)
    free = f"{est.available / GIB:.1f} GiB free now" if est.available is not None else "free memory unknown"
    return (f"Memory estimate for B = {batch}: weights {est.weights / GIB:.2f} GiB (already loaded) + KV cache "
            f"{est.kv_cache / GIB:.3f} + activations {est.activations / GIB:.3f} + logits {est.logits / GIB:.3f} GiB; "
            f"{free}. Sizes that would not fit are refused before anything runs.")


def batch_refusal(lm, sizes: list[int], prompt_tokens: int, output_tokens: int) -> str | None:
    """Why the batch sweep must not run (a size would not fit in memory), or None: checked before anything runs."""
    try:
        for b in sizes:
            check_batch_memory(lm, b, prompt_tokens, output_tokens)
    except EngineError as exc:
        return str(exc)
    return None


def batch_progress(partial: SweepResult) -> tuple[str, float]:
    """The progress bar's text and fraction after a batch sweep's latest point."""
    p = partial.points[-1]
    return f"B = {p.batch_size}: step {p.itl_p50_s * 1e3:.0f} ms", partial.done / len(partial.planned)


@dataclass(frozen=True)
class Crossover:
    """Where decode stops being memory-bound as B grows: measured on this machine, and predicted from its ridge."""
    measured: int | None  # smallest B whose decode step is clearly slower than B = 1's
    predicted: int | None  # from the roofline with the measured ridge (None without measured peaks)
    ridge: float | None  # measured matmul FLOP/s / copy bandwidth (FLOP/byte)
    tried_max: int  # the largest B measured
    dtype_bytes: int  # bytes per weight and per KV element


def batch_crossover(lm, points: list[SweepPoint], peaks, prompt_tokens: int, output_tokens: int) -> Crossover:
    """The batch lab's crossover; `peaks` is this machine's MeasuredPeaks, or None when not measured."""
    nbytes = dtype_bytes(lm.dtype)
    ridge = peaks.matmul_flops_per_s / peaks.copy_bytes_per_s if peaks is not None else None
    predicted = (predicted_crossover_batch(lm.config, prompt_tokens + output_tokens // 2, ridge, nbytes, nbytes)
                 if ridge is not None else None)
    return Crossover(measured_crossover(points), predicted, ridge, max(p.batch_size for p in points), nbytes)
