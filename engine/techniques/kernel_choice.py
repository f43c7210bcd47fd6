"""Kernels chosen by measurement: time each library matmul at this model's shapes on this CPU, keep the fastest.

Which kernel streams weights best depends on the chip, so the first load on a machine times every candidate per
phase (decode: one row; a batch's decode step: WIDE_PASS rows; prefill: PREFILL_ROWS rows; long prefill: LONG_ROWS
rows), best of a few rounds with the candidates taking turns, and remembers the fastest in the model cache, keyed by
the CPU's model and flags, the torch version, the threads, the dtype and the model's shapes. Plain F.linear is always
a candidate and wins ties (within MARGIN), so "fast" is never slower than plain by construction. A disturbed
measurement is measured again as measured_cache.py says. Why and what was measured:
docs/decisions/kernels-by-measurement.md.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from engine.core.backends import WIDE_PASS
from engine.host.cpu_wait import CpuWaitMeter
from engine.techniques import measured_cache
from engine.techniques.kernel_candidates import CANDIDATES, apply, available, prepare

PHASES = ("decode", "decode_batch", "prefill", "prefill_long")
PREFILL_ROWS = 128  # the prompt length prefill is timed at (a wide matrix product, bound by arithmetic)
LONG_ROWS = 1024  # and long prefill: the library's blocking for many rows may favour another kernel
LONG_FROM = int(math.sqrt(PREFILL_ROWS * LONG_ROWS))  # 362: prompts (rows) from here on run the long-prefill kernel
DECODE_BYTES = 64e6  # decode is timed over enough whole layers to leave the CPU's caches (then scaled to all)
MARGIN = 0.03  # a candidate must beat plain F.linear by more than this to be chosen (timing noise; fast_paths' too)
# each phase's matrix rows (its inputs): a batch's decode step is timed full (a batch mode's few rows: a kernel that
# streams one row well may repack or copy the weights for a few, 1.5x slower than another at 8 rows on an EPYC)
ROWS = {"decode": 1, "decode_batch": WIDE_PASS, "prefill": PREFILL_ROWS, "prefill_long": LONG_ROWS}
REPEATS = {"decode": 5, "decode_batch": 5, "prefill": 3, "prefill_long": 3}
WaitMeter = CpuWaitMeter  # what reads the measuring threads' run-queue wait (a test puts a fake one here)


@dataclass
class Choice:
    decode: str  # the kernel for one row (one sequence's decode step)
    prefill: str  # the kernel for wide prompts (more than WIDE_PASS rows, fewer than LONG_FROM)
    ms: dict  # {"decode": {kernel: ms of all the model's matmuls for one step}, "decode_batch": {... at WIDE_PASS
    #            rows}, "prefill": {kernel: ms at PREFILL_ROWS}, "prefill_long": {kernel: ms at LONG_ROWS}}
    seconds: float = 0.0  # how long the measuring took, on the run that measured
    cached: bool = False  # True: read back from the cache file, nothing measured in this process
    note: str = ""  # e.g. why the cache file was not used
    prefill_long: str = ""  # the kernel for prompts of LONG_FROM rows or more ("" = prefill's)
    cpu_wait: float | None = None  # s the measuring threads were runnable without a CPU (None: not measurable here)
    tries: int = 1  # measurements of this key so far (more than one only after disturbed ones)
    decode_batch: str = ""  # the kernel for 2 to WIDE_PASS rows (a batch's decode step, a short prompt; "" = decode's)

    @property
    def long(self) -> str:
        return self.prefill_long or self.prefill

    @property
    def batch(self) -> str:
        return self.decode_batch or self.decode

    @property
    def wait_share(self) -> float:
        return measured_cache.wait_share(self.cpu_wait, self.seconds)

    @property
    def disturbed(self) -> bool:
        return measured_cache.disturbed(self.cpu_wait, self.seconds)

    def label(self) -> str:
        """Short, for the sidebar and the Trace: what each phase runs."""
        if self.decode == self.batch == self.prefill == self.long:
            return f"fast: {CANDIDATES[self.decode].words} (measured fastest here)"
        decode = CANDIDATES[self.decode].words + " for decode"
        if self.batch != self.decode:
            decode += f" ({CANDIDATES[self.batch].words} for a batch's steps)"
        prompts = CANDIDATES[self.prefill].words + " for prompts"
        if self.long != self.prefill:
            prompts = (f"{CANDIDATES[self.prefill].words} for prompts under {LONG_FROM} tokens, "
                       f"{CANDIDATES[self.long].words} for longer ones")
        return f"fast: {decode}, {prompts} (measured)"

    def why(self) -> str:
        """The measured ms of each candidate, fastest first: 'decode matmuls: plain 20.8 ms vs prepacked 40.0 ms'."""
        parts = []
        for phase in PHASES:
            what = {"decode": "decode step's matmuls", "decode_batch": f"{WIDE_PASS} sequences' decode step's matmuls"}.get(
                phase, f"prefill {ROWS[phase]} tokens' matmuls")
            times = sorted(self.ms.get(phase, {}).items(), key=lambda kv: kv[1])
            if times:
                parts.append(f"{what}: " + " vs ".join(f"{name} {_ms(ms)} ms" for name, ms in times))
        how = "cached from an earlier measurement on this CPU" if self.cached else f"measured now in {self.seconds:.2f} s"
        if self.disturbed:
            how += (f"; other programs held the CPU for {self.cpu_wait:.2f} s of the {self.seconds:.2f} s measured "
                    f"({100 * self.wait_share:.0f} %), so the ranking may be theirs: "
                    f"{measured_cache.again('measured', self.tries)}")
        return f"{'; '.join(parts)} ({how}{'; ' + self.note if self.note else ''})"


def _ms(ms: float) -> str:
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2g}"


def pick(ms: dict[str, float]) -> str:
    """The fastest kernel; plain F.linear stays unless another beats it by more than MARGIN."""
    best = min(ms, key=ms.get)
    if "plain" in ms and ms[best] > ms["plain"] * (1 - MARGIN):
        return "plain"
    return best


# ------------------------------------------------------------------------------------------------
# The record in the cache file (measured_cache.py); one that cannot be read is measured again
# ------------------------------------------------------------------------------------------------
def _valid(c: dict | None) -> Choice | None:
    if c is None:
        return None
    try:
        ms = {p: {k: float(v) for k, v in c["ms"][p].items()} for p in PHASES}  # an entry from before a phase: measured again
        wait = c["cpu_wait"]  # an entry from before the wait was recorded: measured again (its wait unknown)
        choice = Choice(c["decode"], c["prefill"], ms, float(c["seconds"]), prefill_long=c["prefill_long"],
                        cpu_wait=None if wait is None else float(wait), tries=int(c.get("tries", 1)),
                        decode_batch=c["decode_batch"])
        return choice if {choice.decode, choice.batch, choice.prefill, choice.long} <= set(CANDIDATES) else None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def choose(model: nn.Module, dtype: torch.dtype, cache_dir: Path | None = None, remeasure: bool = False) -> Choice:
    """The kernels for this model on this CPU: from the cache file when its key matches, else measured (and cached)."""
    folder = cache_dir or measured_cache.default_cache_dir()
    key = measured_cache.machine_key(model, dtype) | {"what": "matmul kernels"}
    note = measured_cache.read_all(folder)[1]
    found = None if remeasure else _valid(measured_cache.recall(folder, key))
    if found is not None and not measured_cache.measure_again(found):
        found.cached = True
        return found
    choice = measure(model, dtype)
    choice.note = note
    if found is not None:  # the cached one was disturbed: keep the less disturbed of the two, count the tries
        waits = f"{found.cpu_wait or 0:.2f} s then {choice.cpu_wait or 0:.2f} s"
        choice.tries = found.tries + 1
        if found.wait_share < choice.wait_share:
            found.tries, found.cached = choice.tries, True
            choice = found
        choice.note = f"measured again after a disturbed measurement (waits {waits}); kept the less disturbed of the two"
    measured_cache.remember(folder, key, asdict(choice) | {"cached": False, "note": ""})
    return choice


# ------------------------------------------------------------------------------------------------
# The measurement: every candidate on the same matrices, taking turns, median of a few rounds
# ------------------------------------------------------------------------------------------------
def _sample(model: nn.Module) -> tuple[list[nn.Linear], float, list[nn.Linear], nn.Linear | None]:
    """(linears of the first layers, layers they stand for per layer timed, the head...): decode reads at least
    DECODE_BYTES of whole layers so the weights come from memory, not cache; layers are alike, so scale up."""
    blocks = list(getattr(model, "blocks", []))
    head = getattr(model, "lm_head", None)
    if not blocks:  # not our Transformer: time every Linear once
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        return linears, 1.0, linears, None
    per_block = [[m for m in b.modules() if isinstance(m, nn.Linear)] for b in blocks]
    block_bytes = sum(m.weight.numel() * m.weight.element_size() for m in per_block[0]) or 1
    k = min(len(blocks), max(1, math.ceil(DECODE_BYTES / block_bytes)))
    decode = [m for ms in per_block[:k] for m in ms]
    return decode, len(blocks) / k, per_block[0], head if isinstance(head, nn.Linear) else None


@torch.inference_mode()
def _time_pass(kernel: str, mats: list) -> float:
    """Seconds for one pass of `kernel` over the prepared matrices, each (input, weight, bias, extras)."""
    start = time.perf_counter()
    for x, weight, bias, extras in mats:
        apply(kernel, x, weight, bias, extras)
    return time.perf_counter() - start


def _phase_ms(phase: str, kernels: list[str], linears: list[nn.Linear], scale: float, dtype: torch.dtype) -> dict[str, float]:
    rows = ROWS[phase]
    if not linears:
        return {k: 0.0 for k in kernels}
    gen = torch.Generator().manual_seed(0)
    xs = {m.in_features: torch.randn(rows, m.in_features, generator=gen).to(dtype) for m in linears}  # (M, K) each
    prepared = {k: [(xs[m.in_features], m.weight, m.bias, prepare(k, m.weight, rows)) for m in linears] for k in kernels}
    times: dict[str, list[float]] = {k: [] for k in kernels}
    for r in range(REPEATS[phase] + 1):  # round 0 warms up (first-call costs belong to no phase)
        for k in kernels[r % len(kernels):] + kernels[: r % len(kernels)]:
            t = _time_pass(k, prepared[k])
            if r:
                times[k].append(t)
    return {k: 1000 * scale * min(v) for k, v in times.items()}  # the best round: other programs only ever add time


def measure(model: nn.Module, dtype: torch.dtype) -> Choice:
    """Time every candidate that works for this dtype here, per phase, and pick the fastest of each."""
    meter = WaitMeter()
    meter.mark()
    start = time.perf_counter()
    decode_linears, scale, prefill_linears, head = _sample(model)
    ms = {}
    for phase in PHASES:
        serves = "decode" if ROWS[phase] <= WIDE_PASS else "prefill"  # the candidates' own phase names
        kernels = [k for k in CANDIDATES if serves in CANDIDATES[k].phases and available(k, dtype)]
        if serves == "decode":
            ms[phase] = _phase_ms(phase, kernels, decode_linears, scale, dtype)
            if head is not None:  # the head is read once per step: timed on its own, added once
                ms[phase] = {k: v + _phase_ms(phase, [k], [head], 1.0, dtype)[k] for k, v in ms[phase].items()}
        else:
            n_blocks = len(getattr(model, "blocks", [])) or 1
            ms[phase] = _phase_ms(phase, kernels, prefill_linears, n_blocks if head is not None else 1.0, dtype)
    seconds = time.perf_counter() - start
    wait = meter.lap().longest if meter.available else None  # the thread that waited longest (about what it added)
    return Choice(pick(ms["decode"]), pick(ms["prefill"]), ms, seconds, prefill_long=pick(ms["prefill_long"]),
                  cpu_wait=wait, decode_batch=pick(ms["decode_batch"]))
