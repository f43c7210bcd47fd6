"""Measure each remedy on this machine, per phase: does it shorten TTFT (the valley), TPOT (the bridge), or neither?

Every function runs the baseline and the remedy on the same prompt, on a Run's path (`engine.generate`, watched as a
Run is: engine/host/run_watch.py), repeated and interleaved (baseline, remedy, baseline, remedy ...), and returns rows
of the medians with every run's numbers kept for the spread and the verdict (engine/labs/repeats.py) and the CPU wait
the runs met; `progress(message, fraction)` reports along the way and may return False to cancel (raises
`Cancelled`). No number here is estimated. Lesson: find which segment is stuck, then use that segment's strategy.
The gap between steps (overhead, CUDA graphs) is engine/labs/step_overhead.py.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import engine
from engine.core.clock import now
from engine.core.metrics import summarize
from engine.core.prompting import encode_prompt
from engine.host.run_watch import RunWatch
from engine.labs.decode_paths import batched_path, decode_path, has_fused_step
from engine.labs.repeats import CpuWait, Repeated, cpu_wait_of
from engine.techniques.prefix_cache import two_turn_chat
from engine.techniques.quantize import Agreement, compare_logits, matrix_bytes, quantize_model
from engine.techniques.speculative import generate_speculative

Progress = Callable[[str, float], bool | None]


class Cancelled(Exception):
    """The user pressed Cancel; partial results are dropped."""


def _tick(progress: Progress | None, message: str, fraction: float) -> None:
    if progress is not None and progress(message, fraction) is False:
        raise Cancelled(message)


def _on_step(progress: Progress | None, message: str, lo: float, hi: float, total: int):
    """An engine `on_step` callback mapping generated tokens onto the progress range [lo, hi]."""
    def on_step(trace) -> bool:
        done = len(trace.output_ids) / max(total, 1)
        return progress is None or progress(message, lo + (hi - lo) * min(done, 1.0)) is not False
    return on_step


@dataclass
class PhaseRow:
    """One configuration's two phase costs, measured: the medians of its runs, each run's kept."""
    label: str
    ttft_s: float
    tpot_s: float
    prompt_tokens: int
    output_tokens: int
    matrix_bytes: int = 0  # bytes of weight matrices a decode step reads (0 when not relevant)
    ttft_runs: list[float] = field(default_factory=list)  # each run's, in the order they ran (paired across rows)
    tpot_runs: list[float] = field(default_factory=list)
    cpu_wait: CpuWait | None = None  # what other programs took from these runs (None: not from Traces)
    path: str = ""  # the decode path its steps ran (engine/labs/decode_paths.py)

    @classmethod
    def from_traces(cls, label: str, traces: list, matrix_bytes: int = 0) -> PhaseRow:
        sums = [summarize(t) for t in traces]
        ttft, tpot = [s.ttft_s for s in sums], [s.tpot_s for s in sums]
        return cls(label, Repeated.of(ttft).median, Repeated.of(tpot).median, sums[0].prompt_tokens,
                   sums[0].output_tokens, matrix_bytes, ttft, tpot, cpu_wait_of(traces))


# --- KV cache on vs off ------------------------------------------------------------------------------

@dataclass
class KVCacheResult:
    cached: engine.Trace
    uncached: engine.Trace
    same_tokens: bool


def measure_kv_cache(lm, prompt: str, n_tokens: int = 24, chat: bool = True, progress: Progress | None = None) -> KVCacheResult:
    """Greedy with the KV cache vs recomputing the whole sequence every step; same tokens expected."""
    ids = encode_prompt(lm, prompt, chat)
    cached = engine.generate(lm, ids, n_tokens, on_step=_on_step(progress, "with the KV cache", 0.0, 0.3, n_tokens),
                             watch=RunWatch())
    if cached.stop_reason == "cancelled":
        raise Cancelled("KV cache run")
    uncached = engine.generate_no_cache(lm, ids, n_tokens, on_step=_on_step(progress, "without a cache", 0.3, 1.0, n_tokens))
    if uncached.stop_reason == "cancelled":
        raise Cancelled("no-cache run")
    return KVCacheResult(cached, uncached, cached.output_ids == uncached.output_ids)


# --- speculative decoding by prompt lookup --------------------------------------------------------------

@dataclass
class SpeculativeRow:
    label: str
    greedy: PhaseRow
    speculative: PhaseRow
    acceptance_rate: float  # accepted / drafted
    tokens_per_pass: float  # decode tokens per forward pass (1.0 = plain decoding)
    passes: int
    identical: bool  # same tokens as plain greedy

    @property
    def speedup(self) -> float:
        return self.greedy.tpot_s / self.speculative.tpot_s if self.speculative.tpot_s > 0 else float("nan")


def measure_speculative(lm, prompts: dict[str, str], n_tokens: int = 48, k: int = 4, chat: bool = True,
                        progress: Progress | None = None, repeats: int = 3) -> list[SpeculativeRow]:
    """Plain greedy and prompt-lookup decoding on each prompt, interleaved, `repeats` times each."""
    rows = []
    runs = max(1, repeats)
    for i, (label, prompt) in enumerate(prompts.items()):
        greedy, specs = [], []
        for r in range(runs):
            lo = (i * runs + r) / (len(prompts) * runs)
            hi = lo + 1 / (len(prompts) * runs)
            mid = (lo + hi) / 2
            greedy.append(engine.generate(lm, prompt, n_tokens, chat=chat, watch=RunWatch(),
                                          on_step=_on_step(progress, f"{label}: greedy, run {r + 1}", lo, mid, n_tokens)))
            specs.append(generate_speculative(lm, prompt, n_tokens, k=k, chat=chat,
                                              on_step=_on_step(progress, f"{label}: prompt lookup, run {r + 1}", mid, hi,
                                                               n_tokens)))
            if "cancelled" in (greedy[-1].stop_reason, specs[-1].trace.stop_reason):
                raise Cancelled(label)
        spec = specs[0]
        rows.append(SpeculativeRow(label, PhaseRow.from_traces("greedy", greedy),
                                   PhaseRow.from_traces("prompt lookup", [x.trace for x in specs]),
                                   spec.acceptance_rate, spec.tokens_per_pass, len(spec.passes),
                                   greedy[0].output_ids == spec.trace.output_ids))
    return rows


# --- prefix caching across chat turns ----------------------------------------------------------------

@dataclass
class PrefixResult:
    full: PhaseRow  # turn 2 prefilled from scratch
    reused: PhaseRow  # turn 2 on top of turn 1's cache
    turn2_tokens: int
    reused_tokens: int
    computed_tokens: int
    max_logit_diff: float


def measure_prefix_cache(lm, user1: str, user2: str, answer_tokens: int = 24, decode_tokens: int = 8, repeats: int = 3,
                         progress: Progress | None = None) -> PrefixResult:
    """Turn 2's TTFT from scratch vs reusing turn 1's KV cache (median of `repeats`, each run kept), and decode after
    each (the median step of each run)."""
    runs = []
    for r in range(repeats):
        _tick(progress, f"two-turn chat, run {r + 1} of {repeats}", r / repeats)
        runs.append(two_turn_chat(lm, user1, user2, answer_tokens, decode_tokens))
    n2 = len(runs[0].turn2_ids)

    def step(seconds: list[float]) -> float:
        return statistics.median(seconds) if seconds else float("nan")

    def row(label: str, ttft: list[float], tpot: list[float]) -> PhaseRow:
        return PhaseRow(label, Repeated.of(ttft).median, Repeated.of(tpot).median, n2, decode_tokens, 0, ttft, tpot)

    full = row("from scratch", [x.full.seconds for x in runs], [step(x.decode_full_s) for x in runs])
    reused = row("prefix reused", [x.reused.seconds for x in runs], [step(x.decode_reused_s) for x in runs])
    return PrefixResult(full, reused, n2, runs[-1].reused.reused_tokens, runs[-1].reused.computed_tokens,
                        max(x.max_logit_diff for x in runs))


# --- dtype and int8 weights ----------------------------------------------------------------------------

def measure_models(models: dict[str, object], prompt: str, n_tokens: int = 24, chat: bool = True, repeats: int = 3,
                   progress: Progress | None = None, outputs: dict[str, list] | None = None) -> list[PhaseRow]:
    """The same greedy request on each model (e.g. float32 vs bfloat16), interleaved, `repeats` rounds: each row the
    medians, every run kept (round r of one row pairs with round r of another).

    `outputs`, when given, receives each model's generated token ids (label -> ids of the first run).
    """
    traces: dict[str, list] = {label: [] for label in models}
    total = repeats * len(models)
    for r in range(repeats):
        for i, (label, m) in enumerate(models.items()):
            at = (r * len(models) + i) / total
            trace = engine.generate(m, prompt, n_tokens, chat=chat, watch=RunWatch(),
                                    on_step=_on_step(progress, f"{label}, run {r + 1}", at, at + 1 / total, n_tokens))
            if trace.stop_reason == "cancelled":
                raise Cancelled(label)
            if outputs is not None:
                outputs.setdefault(label, trace.output_ids)
            traces[label].append(trace)
    rows = [PhaseRow.from_traces(label, traces[label], matrix_bytes(m.model)) for label, m in models.items()]
    for row, m in zip(rows, models.values()):
        row.path = decode_path(m, 1)
    return rows


def measure_dtypes(lm, dtypes: tuple[str, ...], prompt: str, n_tokens: int = 24, chat: bool = True, repeats: int = 3,
                   progress: Progress | None = None) -> list[PhaseRow]:
    """The same request in `lm`'s dtype and each of `dtypes` (the same weights, loaded again in that dtype)."""
    from engine.loading.loader import load_model

    models = {lm.dtype_name: lm}
    for dt in dtypes:
        if dt not in models:
            _tick(progress, f"loading the same weights in {dt}", 0.0)
            models[dt] = load_model(lm.source, device=str(lm.device), dtype=dt)
    return measure_models(models, prompt, n_tokens, chat, repeats, progress)


@dataclass
class KernelsResult:
    rows: list[PhaseRow]  # plain first, then fast
    fast_label: str  # what the fast path runs here (engine/techniques/kernels.py)
    same_tokens: bool  # greedy tokens of both paths agree


def measure_kernels(lm, prompt: str, n_tokens: int = 24, chat: bool = True, repeats: int = 3,
                    progress: Progress | None = None) -> KernelsResult:
    """The same weights through nn.Linear and through the fast library kernels: same bytes, read better."""
    from engine.techniques.kernels import with_kernels

    _tick(progress, "preparing both kernel paths (prepacking the weights once)", 0.01)
    plain, fast = with_kernels(lm, "plain"), with_kernels(lm, "fast")
    outputs: dict[str, list] = {}
    rows = measure_models({"plain (nn.Linear)": plain, "fast kernels": fast}, prompt, n_tokens, chat, repeats, progress,
                          outputs)
    return KernelsResult(rows, fast.kernels, outputs["plain (nn.Linear)"] == outputs["fast kernels"])


@dataclass
class Int8Result:
    rows: list[PhaseRow]  # float first, then int8: both on the same decode path (the eager loop int8 runs)
    kernel: str  # which matmul ran the int8 weights
    agreement: Agreement
    quantize_seconds: float
    run_row: PhaseRow | None = None  # float on the fused step a Run takes here, when it differs from that path


def measure_int8(lm, prompt: str, n_tokens: int = 24, chat: bool = True, repeats: int = 3,
                 progress: Progress | None = None) -> Int8Result:
    """Quantise a copy of `lm` to int8 weights, check it against float, then time both phases of both on the same
    decode path (int8 runs the eager loop: so does its float baseline); where a Run takes a fused step here, float
    on it too, shown apart."""
    _tick(progress, "quantising a copy of the model to int8", 0.02)
    start = now(lm.device)
    qlm, kernel = quantize_model(lm)
    seconds = now(lm.device) - start
    _tick(progress, "comparing int8 logits with float", 0.15)
    ids = encode_prompt(lm, prompt, chat)
    check = [ids, encode_prompt(lm, "The wide valley lets the whole convoy ride side by side, one plank at a time.")]
    agreement = compare_logits(lm, qlm, check)
    fused = has_fused_step(lm)
    models = {lm.dtype_name + (" (the loop int8 runs)" if fused else ""): batched_path(lm), "int8 weights": qlm}
    if fused:
        models[f"{lm.dtype_name} (a Run's {decode_path(lm, 1)})"] = lm
    rows = measure_models(models, prompt, n_tokens, chat, repeats,
                          progress=None if progress is None else (lambda m, f: progress(m, 0.2 + 0.8 * f)))
    return Int8Result(rows[:2], kernel, agreement, seconds, rows[2] if len(rows) > 2 else None)
