"""The sweep and batch labs' numbers: which lengths fit the model, the TTFT fit, the batch memory guard and the
batch crossover (measured, and predicted from this machine's ridge point). Streamlit-free.

`lm` is the model as the dashboard knows it (the worker's ModelInfo: config, dtype, device, weight bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.core.config import dtype_bytes
from engine.errors import EngineError
from engine.labs.sweeps import (
    SweepPoint,
    SweepResult,
    check_batch_memory,
    estimate_batch_memory,
    measured_crossover,
    median_step_by_context,
    split_allowed,
)
from engine.perfmodel.fit import TTFTFit, fit_ttft
from engine.perfmodel.flops import prefill_flops
from engine.perfmodel.roofline import predicted_crossover_batch
from ui.text import lab_text

GIB = 2**30
MS = 1000.0


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


def _fraction(partial: SweepResult) -> float:
    """Runs done / runs planned (every point, the separate ones too, once per round)."""
    per_round = max(len(partial.planned) + len(partial.separate), 1)
    done = sum(p.runs for p in partial.points + partial.separate)
    return min(done / (per_round * max(partial.repeats, 1)), 1.0)


def sweep_progress(partial: SweepResult) -> tuple[str, float]:
    """The progress bar's text and fraction after a sweep's latest run."""
    last = partial.points[-1]
    return (f"round {min(partial.rounds_done + 1, partial.repeats)} of {partial.repeats}: {last.prompt_tokens} in, "
            f"{last.output_tokens} out, TTFT {last.ttft_s * 1e3:.0f} ms (median so far)", _fraction(partial))


def ttft_fit(points: list[SweepPoint]) -> TTFTFit | None:
    """TTFT against prompt length, fitted (engine/perfmodel/fit.py); None with too few points."""
    return fit_ttft([p.prompt_tokens for p in points], [p.ttft_s for p in points])


AGREE_POINTS = 0.05  # the fit's T² share and the FLOP count's attention share within 5 points: "they agree"
TIGHT_R2 = 0.99  # a fit this close to its points, with c known to ±5 points of share, is "tight"


def attention_flop_share(cfg, tokens: int) -> float:
    """Attention's share of one prefill's FLOPs at `tokens` (engine/perfmodel/flops.py: computed, not measured)."""
    flops = prefill_flops(cfg, tokens)
    return flops.attention / flops.total if flops.total > 0 else float("nan")


def fit_text(fit: TTFTFit | None, cfg=None) -> str:
    """What was fitted and how well (R², the largest residual, c's standard error); the T² share the fit implies next
    to the attention share the FLOP count gives (`cfg`: the model's shapes), the count preferred where they disagree."""
    if fit is None:
        return "Measure at least two different prompt lengths to fit TTFT ≈ a + b·T + c·T²."
    how_well = []
    exact = fit.distinct <= 3  # as many prompt lengths as coefficients: the curve hits each length's mean
    if exact:
        how_well.append("as many prompt lengths as coefficients: the curve passes through each, nothing is left to "
                        "judge its shape")
    elif math.isfinite(fit.r2):
        how_well.append(f"R² = {fit.r2:.3f}")
    if math.isfinite(fit.max_residual) and not exact:
        how_well.append(f"points up to {fit.max_residual * MS:,.1f} ms from the curve")
    quality = f" ({', '.join(how_well)})" if how_well else ""
    linear = fit.distinct == 2
    curve = "a + b·T" if linear else "a + b·T + c·T²"
    c_words = "" if linear else (
        f", c = {fit.c * 1e9:,.3f} ns per token² (attention over the causal triangle)"
        + (f" ± {fit.c_stderr * 1e9:,.3f} (one standard error)" if math.isfinite(fit.c_stderr) else ""))
    lines = [f"**What was fitted:** TTFT ≈ {curve} by least squares to {fit.n_points} measured points at "
             f"{fit.distinct or fit.n_points} prompt lengths{quality}: a = {fit.a * MS:.1f} ms, b = {fit.b * 1e6:.1f} µs "
             f"per token (the weights' matmuls){c_words}."]
    if linear:
        lines.append("With two prompt lengths only a straight line fits: measure a third to see a T² term.")
        return " ".join(lines)
    if fit.c < 0 or fit.b < 0:
        lines.append("A negative term means the T² (or T) effect is lost in timing noise at these lengths: rerun, or add "
                     "longer prompts. The fit makes no statement about attention here.")
    share = fit.quadratic_share_at_max
    lo, hi = fit.quadratic_share_range
    spread = f" (±1 standard error: {max(lo, 0):.0%}–{hi:.0%})" if math.isfinite(lo) and math.isfinite(hi) else ""
    if cfg is None:
        lines.append(f"At T = {fit.t_max:,} the fitted quadratic term (c·T²) is {share:.0%} of the fitted TTFT{spread}.")
        return " ".join(lines)
    counted = attention_flop_share(cfg, fit.t_max)
    lines.append(f"At T = {fit.t_max:,} the fit's quadratic term (c·T²) is {share:.0%} of its TTFT{spread}; the FLOP count puts "
                 f"attention at **{counted:.0%}** of prefill's arithmetic there (computed from the model's shapes).")
    tight = (not exact and fit.r2 >= TIGHT_R2 and math.isfinite(lo) and abs(hi - lo) <= 2 * AGREE_POINTS)
    if fit.c < 0 or fit.b < 0 or not tight:
        lines.append(f"The fit is too loose to say what attention costs here: keep the FLOP count's {counted:.0%}. "
                     "Three coefficients fitted to a few noisy points can trade one term for another (a slow first "
                     "point bends the curve), so this fit's share is no measurement of attention.")
    elif abs(share - counted) <= AGREE_POINTS:
        lines.append("The fit is tight and the two agree.")
    else:
        lines.append("The fit is tight, so on this machine the T² part of the time is larger than attention's share "
                     "of the FLOPs: attention's small matrices and softmax (and activations outgrowing the caches) cost "
                     f"more per FLOP than the big matmuls. The FLOP count's {counted:.0%} is the statement that holds on "
                     "any machine; the fit's share is this machine's.")
    return " ".join(lines)


def decode_context_note(lm, points: list[SweepPoint]) -> str:
    """The words under the decode-step chart: bytes per step from the model's shapes, over the contexts measured."""
    contexts = [n for n, _ in median_step_by_context(points)]
    return lab_text.decode_context_text(lm.config, lm.dtype, contexts, lm.name)


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
    """The progress bar's text and fraction after a batch sweep's latest run."""
    p = (partial.points or partial.separate)[-1]
    return (f"round {min(partial.rounds_done + 1, partial.repeats)} of {partial.repeats}: B = {p.batch_size}, step "
            f"{p.itl_p50_s * 1e3:.0f} ms (median so far)", _fraction(partial))


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
