"""Measured sweeps: TTFT against prompt length, decode latency against output length, throughput against batch.

Each point is one real `generate` / `generate_batch` run (greedy, ignore_eos so lengths are exact).
A callback after every point lets a caller show progress, keep partial results and cancel.
The batch sweep is guarded by a memory estimate so a too-large batch is refused, never run out of memory.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from engine.core.config import dtype_bytes as config_dtype_bytes
from engine.core.free_memory import available_memory_bytes
from engine.core.generate import generate_batch
from engine.core.metrics import summarize
from engine.core.prompting import SWEEP_TEXT, check_lengths
from engine.errors import EngineError

PointCallback = Callable[["SweepResult"], bool | None]  # called after each point with the partial result; False cancels


@dataclass
class SweepPoint:
    """One measured run of a sweep."""
    kind: str  # "prompt" (TTFT sweep), "output" (decode sweep) or "batch"
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float  # prefill pass + first sampling
    decode_s: float  # sum of all decode steps
    tpot_s: float  # mean decode-step latency (NaN with a single output token)
    itl_p50_s: float
    total_s: float
    prefill_tokens_per_s: float  # whole batch
    decode_tokens_per_s: float  # whole batch: batch / TPOT
    step_kv_lengths: list[int] = field(default_factory=list)  # context length after each decode step
    step_seconds: list[float] = field(default_factory=list)  # that step's latency

    def row(self) -> dict:
        """The scalar columns, for a table or CSV."""
        return {k: v for k, v in asdict(self).items() if not k.startswith("step_")}


@dataclass
class SweepResult:
    kind: str
    planned: list[int]  # the lengths / batch sizes asked for
    points: list[SweepPoint] = field(default_factory=list)
    cancelled: bool = False
    model: str = ""
    device: str = ""

    @property
    def done(self) -> int:
        return len(self.points)


def prompt_ids_of_length(lm, n_tokens: int, offset: int = 0, text: str = SWEEP_TEXT) -> list[int]:
    """Exactly n_tokens ids cut from a long text tokenised with the model's tokenizer (repeated as needed)."""
    if n_tokens < 1:
        raise EngineError(f"a prompt needs at least 1 token (asked for {n_tokens})")
    base = lm.tokenizer.encode(text, add_special_tokens=False)
    if not base:
        raise EngineError("the sweep text produced no tokens with this tokenizer")
    need = n_tokens + offset
    ids = base * (need // len(base) + 1)
    return ids[offset:offset + n_tokens]


def split_allowed(lm, prompt_lengths: list[int], output_tokens: list[int] | int) -> tuple[list, list]:
    """Which (prompt, output) length pairs fit the model's context; returns (allowed, refused messages)."""
    outs = output_tokens if isinstance(output_tokens, list) else [output_tokens] * len(prompt_lengths)
    allowed, refused = [], []
    for t, n in zip(prompt_lengths, outs):
        try:
            check_lengths(lm, int(t), int(n))
            allowed.append((int(t), int(n)))
        except EngineError as exc:
            refused.append(str(exc))
    return allowed, refused


def _point(kind: str, trace) -> SweepPoint:
    s = summarize(trace)
    return SweepPoint(kind=kind, batch_size=trace.batch_size, prompt_tokens=trace.n_prompt, output_tokens=trace.n_output,
                      ttft_s=s.ttft_s, decode_s=s.decode_s, tpot_s=s.tpot_s, itl_p50_s=s.itl_p50_s, total_s=s.total_s,
                      prefill_tokens_per_s=s.prefill_tokens_per_s, decode_tokens_per_s=s.decode_tokens_per_s,
                      step_kv_lengths=[st.kv_length for st in trace.steps],
                      step_seconds=[st.seconds for st in trace.steps])


def _run(lm, kind: str, plan: list[tuple[int, int, int]], on_point: PointCallback | None) -> SweepResult:
    """plan: (batch, prompt tokens, output tokens) per point, measured in order."""
    result = SweepResult(kind=kind, planned=[p[{"batch": 0, "prompt": 1, "output": 2}[kind]] for p in plan],
                         model=lm.name, device=str(lm.device))
    for i, (batch, n_prompt, n_out) in enumerate(plan):
        prompts = [prompt_ids_of_length(lm, n_prompt, offset=7 * b) for b in range(batch)]  # different, equal length
        trace = generate_batch(lm, prompts, n_out, temperature=0.0, ignore_eos=True)
        result.points.append(_point(kind, trace))
        if on_point is not None and on_point(result) is False:
            result.cancelled = i + 1 < len(plan)
            break
    return result


def sweep_prompt_lengths(lm, prompt_lengths: list[int], output_tokens: int = 8,
                         on_point: PointCallback | None = None) -> SweepResult:
    """TTFT (and decode latency at that context) for each prompt length, same short output each time."""
    allowed, refused = split_allowed(lm, list(prompt_lengths), output_tokens)
    if not allowed:
        raise EngineError(refused[0] if refused else "no prompt lengths to measure")
    return _run(lm, "prompt", [(1, t, n) for t, n in allowed], on_point)


def sweep_output_lengths(lm, output_lengths: list[int], prompt_tokens: int = 32,
                         on_point: PointCallback | None = None) -> SweepResult:
    """Decode cost for each output length, same prompt each time: total time grows with the bridge."""
    allowed, refused = split_allowed(lm, [prompt_tokens] * len(output_lengths), [int(n) for n in output_lengths])
    if not allowed:
        raise EngineError(refused[0] if refused else "no output lengths to measure")
    return _run(lm, "output", [(1, t, n) for t, n in allowed], on_point)


# ---- batch lab: memory guard and sweep ------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int  # already resident: the model is loaded
    kv_cache: int  # B x (T + N) x KV bytes per token, preallocated
    activations: int  # largest transient tensors of one prefill layer (B x T x widths) + attention scores
    logits: int  # B x vocab x 4: prefill computes only the last position's logits (engine/model.py)
    available: int | None  # free memory on the device now (None when unknown)

    @property
    def extra(self) -> int:
        """What this run adds on top of the loaded weights."""
        return self.kv_cache + self.activations + self.logits

    @property
    def total(self) -> int:
        return self.weights + self.extra


def estimate_batch_memory(lm, batch: int, prompt_tokens: int, output_tokens: int,
                          available: int | None = None) -> MemoryEstimate:
    """`lm`: a LoadedModel or its ModelInfo (config, dtype, device and weight_bytes are all it reads)."""
    cfg = lm.config
    dtype_bytes = config_dtype_bytes(lm.dtype)
    B, T, S = batch, prompt_tokens, prompt_tokens + output_tokens
    widths = 3 * cfg.d_model + (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim + 3 * cfg.d_ff  # per token, one layer
    scores = B * cfg.n_heads * T * T * 4  # if attention materialises its (B, H, T, T) scores in fp32
    return MemoryEstimate(weights=lm.weight_bytes, kv_cache=B * S * cfg.kv_bytes_per_token(dtype_bytes),
                          activations=B * T * widths * dtype_bytes + scores, logits=B * cfg.vocab_size * 4,
                          available=available if available is not None else available_memory_bytes(lm.device))


def check_batch_memory(lm, batch: int, prompt_tokens: int, output_tokens: int, available: int | None = None,
                       safety: float = 0.8) -> MemoryEstimate:
    """Refuse (EngineError) when the estimate exceeds `safety` x the free memory; else return the estimate."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise EngineError(f"batch size must be a whole number >= 1 (got {batch!r})")
    est = estimate_batch_memory(lm, batch, prompt_tokens, output_tokens, available)
    if est.available is not None and est.extra > safety * est.available:
        gib = 2**30
        raise EngineError(
            f"batch {batch} x {prompt_tokens + output_tokens} tokens needs about {est.extra / gib:.2f} GiB more "
            f"(KV cache {est.kv_cache / gib:.2f} + activations {est.activations / gib:.2f} + logits "
            f"{est.logits / gib:.2f} GiB) but only {est.available / gib:.2f} GiB is free; "
            f"refused to avoid running out of memory: choose a smaller batch or shorter prompt")
    return est


def sweep_batch_sizes(lm, batch_sizes: list[int], prompt_tokens: int = 32, output_tokens: int = 8,
                      on_point: PointCallback | None = None, available: int | None = None) -> SweepResult:
    """Prefill and decode throughput for each batch size; every size is memory-checked before anything runs."""
    sizes = sorted({int(b) for b in batch_sizes})
    if not sizes:
        raise EngineError("choose at least one batch size")
    check_lengths(lm, prompt_tokens, output_tokens)
    for b in sizes:
        check_batch_memory(lm, b, prompt_tokens, output_tokens, available)
    return _run(lm, "batch", [(b, prompt_tokens, output_tokens) for b in sizes], on_point)


def measured_crossover(points: list[SweepPoint], factor: float = 1.5) -> int | None:
    """Smallest batch whose median decode step takes more than `factor` x the smallest batch's: decode turns compute-bound."""
    pts = sorted((p for p in points if p.itl_p50_s == p.itl_p50_s), key=lambda p: p.batch_size)
    if len(pts) < 2:
        return None
    base = pts[0].itl_p50_s
    return next((p.batch_size for p in pts[1:] if p.itl_p50_s > factor * base), None)


def median_step_by_context(points: list[SweepPoint]) -> list[tuple[int, float]]:
    """(context length, median step seconds) over every decode step of every point."""
    by_len: dict[int, list[float]] = {}
    for p in points:
        for n, s in zip(p.step_kv_lengths, p.step_seconds):
            by_len.setdefault(n, []).append(s)
    return [(n, float(np.median(v))) for n, v in sorted(by_len.items())]


def reference_run(lm, prompt_tokens: int = 64, output_tokens: int = 16):
    """A small fixed measurement (real text, exact lengths, greedy) for pages that need one run's points."""
    return generate_batch(lm, [prompt_ids_of_length(lm, prompt_tokens)], output_tokens, temperature=0.0, ignore_eos=True)
