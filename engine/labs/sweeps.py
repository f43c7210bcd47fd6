"""Measured sweeps: TTFT against prompt length, decode latency against output length, throughput against batch.

Each point is a real `generate_batch` run (greedy, ignore_eos so lengths are exact), on the same model object, kernels
and thread choice as a Run from Home, repeated in rounds (round r measures every point once, so a change in the
machine's load falls on every point alike) and reported as the median of its repeats with their spread and the CPU
wait the runs met (engine/labs/repeats.py). A callback after every run lets a caller show progress, keep partial
results and cancel. The batch sweep runs every batch size on one decode path (engine/labs/decode_paths.py) and keeps
a Run's fused batch-1 step apart; it is guarded by a memory estimate so a too-large batch is refused, never run out
of memory.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.core.config import dtype_bytes as config_dtype_bytes
from engine.core.free_memory import available_memory_bytes
from engine.core.generate import generate_batch
from engine.core.metrics import summarize
from engine.core.prompting import SWEEP_TEXT, check_lengths
from engine.errors import EngineError
from engine.host.run_watch import RunWatch
from engine.labs.decode_paths import batched_path, decode_path, has_fused_step
from engine.labs.repeats import FASTER, MIN_REPEATS, CpuWait, Repeated, add_waits, cpu_wait_of, effect_of

PointCallback = Callable[["SweepResult"], bool | None]  # called after each run with the partial result; False cancels
REPEATS = 1  # rounds when a caller names none (other callers' timing stays as it was); the lab pages ask for 3-4:
# a verdict needs at least 3 (engine/labs/repeats.py)
SCALARS = ("kind", "batch_size", "prompt_tokens", "output_tokens", "ttft_s", "decode_s", "tpot_s", "itl_p50_s",
           "total_s", "prefill_tokens_per_s", "decode_tokens_per_s", "decode_path")


@dataclass
class SweepPoint:
    """One point of a sweep: the medians of its repeated runs (one run: that run's numbers)."""
    kind: str  # "prompt" (TTFT sweep), "output" (decode sweep) or "batch"
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float  # prefill pass + first sampling
    decode_s: float  # sum of all decode steps
    tpot_s: float  # mean decode-step latency (NaN with a single output token)
    itl_p50_s: float  # median decode step over every run's steps
    total_s: float
    prefill_tokens_per_s: float  # whole batch, from the median TTFT
    decode_tokens_per_s: float  # whole batch: batch / median TPOT
    step_kv_lengths: list[int] = field(default_factory=list)  # context length after each decode step
    step_seconds: list[float] = field(default_factory=list)  # that step's latency (median over the runs)
    ttft_runs: list[float] = field(default_factory=list)  # each run's TTFT, in the order of the rounds
    tpot_runs: list[float] = field(default_factory=list)  # each run's TPOT
    decode_path: str = ""  # the code its decode steps ran (engine/labs/decode_paths.py)
    cpu_wait: CpuWait | None = None  # what other programs took from its runs (None: older results)

    @property
    def runs(self) -> int:
        return max(len(self.ttft_runs), 1)

    @property
    def ttft(self) -> Repeated:
        return Repeated.of(self.ttft_runs or [self.ttft_s])

    @property
    def tpot(self) -> Repeated:
        return Repeated.of(self.tpot_runs or [self.tpot_s])

    def prefill_rates(self) -> list[float]:
        """Whole-batch prefill tokens/s of each run, in round order."""
        return [self.batch_size * self.prompt_tokens / t if t > 0 else float("nan") for t in self.ttft_runs or [self.ttft_s]]

    def decode_rates(self) -> list[float]:
        """Whole-batch decode tokens/s of each run (batch / TPOT), in round order."""
        return [self.batch_size / t if t > 0 else float("nan") for t in self.tpot_runs or [self.tpot_s]]

    def row(self) -> dict:
        """The scalar columns, for a table or CSV."""
        return {k: getattr(self, k) for k in SCALARS}


@dataclass
class SweepResult:
    kind: str
    planned: list[int]  # the lengths / batch sizes asked for
    points: list[SweepPoint] = field(default_factory=list)
    cancelled: bool = False
    model: str = ""
    device: str = ""
    repeats: int = 1  # rounds planned
    rounds_done: int = 0  # rounds measured in full
    separate: list[SweepPoint] = field(default_factory=list)  # points on another decode path, kept apart (batch 1's
    # fused step: what a Run at batch 1 takes, not comparable with the batched path's points)
    kernels: str = ""  # the model's kernels label, as a Run's Trace records it

    @property
    def done(self) -> int:
        return len(self.points)

    @property
    def cpu_wait(self) -> CpuWait:
        """Every run's CPU wait together."""
        return add_waits(p.cpu_wait for p in self.points + self.separate if p.cpu_wait is not None)


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


def point_of(kind: str, traces: list, path: str = "") -> SweepPoint:
    """The point that repeated runs of one setting make: each number the median of the runs'."""
    sums = [summarize(t) for t in traces]
    med = lambda xs: Repeated.of(xs).median  # noqa: E731 (NaN when no run measured it)
    ttft, tpot = med([s.ttft_s for s in sums]), med([s.tpot_s for s in sums])
    first = traces[0]
    steps = [[st.seconds for st in t.steps] for t in traces]
    width = min(len(x) for x in steps)
    B, T = first.batch_size, first.n_prompt
    return SweepPoint(kind=kind, batch_size=B, prompt_tokens=T, output_tokens=first.n_output,
                      ttft_s=ttft, decode_s=med([s.decode_s for s in sums]), tpot_s=tpot,
                      itl_p50_s=float(np.median([x for run in steps for x in run])) if width else float("nan"),
                      total_s=med([s.total_s for s in sums]),
                      prefill_tokens_per_s=B * T / ttft if ttft > 0 else float("nan"),
                      decode_tokens_per_s=B / tpot if tpot > 0 else float("nan"),
                      step_kv_lengths=[st.kv_length for st in first.steps[:width]],
                      step_seconds=[statistics.median(run[i] for run in steps) for i in range(width)],
                      ttft_runs=[s.ttft_s for s in sums], tpot_runs=[s.tpot_s for s in sums], decode_path=path,
                      cpu_wait=cpu_wait_of(traces))


@dataclass(frozen=True)
class Setting:
    """One point to measure: `batch` prompts of `prompt` tokens, `output` new tokens, on `lm` (its decode `path`)."""
    batch: int
    prompt: int
    output: int
    lm: object
    path: str
    apart: bool = False  # kept in SweepResult.separate, not among the comparable points


def _run(lm, kind: str, plan: list[Setting], on_point: PointCallback | None, repeats: int = 1) -> SweepResult:
    """Measure every setting of `plan` once per round, `repeats` rounds; the result after each run goes to `on_point`."""
    repeats = max(1, int(repeats))
    result = SweepResult(kind=kind, planned=[getattr(p, kind) for p in plan if not p.apart], model=lm.name,
                         device=str(lm.device), repeats=repeats, kernels=lm.kernels)
    traces: list[list] = [[] for _ in plan]
    for r in range(repeats):
        for i, p in enumerate(plan):
            prompts = [prompt_ids_of_length(lm, p.prompt, offset=7 * b) for b in range(p.batch)]  # different, equal length
            traces[i].append(generate_batch(p.lm, prompts, p.output, temperature=0.0, ignore_eos=True,
                                            watch=RunWatch()))  # a Run's threads and CPU wait
            points = [(s, point_of(kind, t, s.path)) for s, t in zip(plan, traces) if t]
            result.points = [pt for s, pt in points if not s.apart]
            result.separate = [pt for s, pt in points if s.apart]
            result.rounds_done = r + (i + 1 == len(plan))
            if on_point is not None and on_point(result) is False:
                result.cancelled = (r + 1, i + 1) != (repeats, len(plan))
                return result
    return result


def _same_path_plan(lm, prompt_lengths: list[int], output_tokens: list[int] | int, what: str) -> list[Setting]:
    """Batch-1 settings on the path a Run at batch 1 takes, for the (prompt, output) pairs that fit the context."""
    allowed, refused = split_allowed(lm, prompt_lengths, output_tokens)
    if not allowed:
        raise EngineError(refused[0] if refused else f"no {what} to measure")
    path = decode_path(lm, 1)
    return [Setting(1, t, n, lm, path) for t, n in allowed]


def sweep_prompt_lengths(lm, prompt_lengths: list[int], output_tokens: int = 8,
                         on_point: PointCallback | None = None, repeats: int = REPEATS) -> SweepResult:
    """TTFT (and decode latency at that context) for each prompt length, same short output each time."""
    return _run(lm, "prompt", _same_path_plan(lm, list(prompt_lengths), output_tokens, "prompt lengths"), on_point, repeats)


def sweep_output_lengths(lm, output_lengths: list[int], prompt_tokens: int = 32,
                         on_point: PointCallback | None = None, repeats: int = REPEATS) -> SweepResult:
    """Decode cost for each output length, same prompt each time: total time grows with the bridge."""
    plan = _same_path_plan(lm, [prompt_tokens] * len(output_lengths), [int(n) for n in output_lengths], "output lengths")
    return _run(lm, "output", plan, on_point, repeats)


# ---- batch lab: memory guard and sweep ------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int  # already resident: the model is loaded
    kv_cache: int  # B x (T + N) x KV bytes per token, preallocated
    activations: int  # largest transient tensors of one prefill layer (B x T x widths) + attention scores
    logits: int  # B x vocab x 4: prefill computes only the last position's logits (engine/core/model.py)
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
                      on_point: PointCallback | None = None, available: int | None = None,
                      repeats: int = REPEATS, fused_point: bool = False) -> SweepResult:
    """Prefill and decode throughput for each batch size, every size on the same decode path (the batched one); with
    `fused_point`, where a Run's batch-1 steps take a fused step, one more batch-1 point on it, kept apart. Every size
    is memory-checked before anything runs."""
    sizes = sorted({int(b) for b in batch_sizes})
    if not sizes:
        raise EngineError("choose at least one batch size")
    check_lengths(lm, prompt_tokens, output_tokens)
    for b in sizes:
        check_batch_memory(lm, b, prompt_tokens, output_tokens, available)
    same = batched_path(lm)
    path = decode_path(same, max(sizes[-1], 2))
    plan = [Setting(b, prompt_tokens, output_tokens, same, path) for b in sizes]
    if fused_point and has_fused_step(lm):
        plan.insert(0, Setting(1, prompt_tokens, output_tokens, lm, decode_path(lm, 1), apart=True))
    return _run(lm, "batch", plan, on_point, repeats)


def measured_crossover(points: list[SweepPoint], factor: float = 1.5) -> int | None:
    """Smallest batch whose decode step takes more than `factor` x the smallest batch's: decode turns compute-bound.
    With repeated rounds, "more" means in every round by more than the rounds' spread (engine/labs/repeats.py), so
    a busy moment cannot place it; with single runs, the median steps are compared."""
    pts = sorted((p for p in points if p.itl_p50_s == p.itl_p50_s), key=lambda p: p.batch_size)
    if len(pts) < 2:
        return None
    base = pts[0]
    for p in pts[1:]:
        paired = effect_of(p.tpot_runs, [factor * t for t in base.tpot_runs])
        if paired.verdict == FASTER if len(paired.measured) >= MIN_REPEATS else p.itl_p50_s > factor * base.itl_p50_s:
            return p.batch_size
    return None


def median_step_by_context(points: list[SweepPoint]) -> list[tuple[int, float]]:
    """(context length, median step seconds) over every decode step of every point."""
    by_len: dict[int, list[float]] = {}
    for p in points:
        for n, s in zip(p.step_kv_lengths, p.step_seconds):
            by_len.setdefault(n, []).append(s)
    return [(n, float(np.median(v))) for n, v in sorted(by_len.items())]


def reference_run(lm, prompt_tokens: int = 64, output_tokens: int = 16, repeats: int = 3):
    """A small fixed measurement (real text, exact lengths, greedy) for pages that need one run's points, on a Run's
    path: `repeats` runs, the one with the median end-to-end time returned, every run's TTFT and TPOT in its
    settings ("repeats": {"ttft_s": [...], "tpot_s": [...]}) for the spread."""
    ids = prompt_ids_of_length(lm, prompt_tokens)
    runs = [generate_batch(lm, [ids], output_tokens, temperature=0.0, ignore_eos=True, watch=RunWatch())
            for _ in range(max(1, repeats))]
    order = sorted(runs, key=lambda t: t.total_seconds)
    chosen = order[(len(order) - 1) // 2]
    chosen.settings["repeats"] = {"ttft_s": [t.prefill_seconds for t in runs],
                                  "tpot_s": [summarize(t).tpot_s for t in runs], "path": decode_path(lm, 1)}
    return chosen
