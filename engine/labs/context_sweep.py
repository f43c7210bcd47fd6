"""The bridge against the context: decode steps timed over KV caches of growing length, up to the model's window (or
as far as memory allows), on the decode path a Run at batch 1 takes.

Each decode step reads every weight and the whole KV cache (Pope et al. 2022), so its time grows linearly with the
context. The cache is filled with stand-in keys and values (random numbers) instead of by a prefill of thousands of
tokens (a minute at 8k tokens on a 2-core CPU): how long a step takes depends on how many numbers it reads, not on
their values, and the page says so. Repeated in rounds, medians with their spread and the CPU wait, as every lab.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import torch

from engine.core.free_memory import available_memory_bytes
from engine.core.generate import decode_loop, new_cache
from engine.errors import EngineError
from engine.host.run_watch import RunWatch
from engine.labs.decode_paths import decode_path
from engine.labs.repeats import CpuWait, Repeated

LADDER = (64, 512, 1024, 2048, 4096, 8192, 16384, 32768)  # contexts tried, then the top one
MOST = 32768  # the lab's own cap: a step over a longer cache takes seconds on a CPU
MEMORY_SHARE = 0.5  # the cache may take at most this share of the free memory
FILL_BLOCK = 256  # stand-in keys and values are one random block of this many positions, tiled


@dataclass
class ContextPoint:
    context: int  # tokens in the cache when the step ran
    step_s: list[float]  # one value per round: the median of that round's steps
    kv_bytes: int  # the cache a step reads at this context (one sequence)

    @property
    def step(self) -> Repeated:
        return Repeated.of(self.step_s)


@dataclass
class ContextSweep:
    model: str
    device: str
    dtype: str
    path: str  # the decode path the steps ran (engine/labs/decode_paths.py)
    weight_bytes: int
    kv_bytes_per_token: int
    window: int  # the model's context window
    limited_by: str  # why the largest context is what it is
    steps: int  # timed steps per context and round
    points: list[ContextPoint] = field(default_factory=list)
    cpu_wait: CpuWait | None = None
    cancelled: bool = False


def context_plan(window: int, kv_bytes_per_token: int, steps: int, available: int | None) -> tuple[list[int], str]:
    """The contexts to measure (ascending) and what limits the largest: the window, memory or the lab's cap."""
    top, why = window - steps - 1, f"the model's window of {window:,} tokens"
    if available is not None and kv_bytes_per_token * top > MEMORY_SHARE * available:
        top = int(MEMORY_SHARE * available // kv_bytes_per_token)
        why = f"the free memory ({available / 2**30:.1f} GiB: the cache may take half)"
    if top > MOST:
        top, why = MOST, f"the lab's cap of {MOST:,} tokens (a step over a longer cache takes seconds here)"
    if top < 2:
        raise EngineError(f"no room for a KV cache here ({why})")
    return sorted({c for c in LADDER if c < top} | {top}), why


def _fill(cache, top: int) -> None:
    """Stand-in keys and values for positions [0, top) of every layer (a random block, tiled)."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    for layer in range(len(cache.keys)):
        for tensors in (cache.keys, cache.values):
            t = tensors[layer]  # (1, K, S_max, D)
            block = torch.randn(t.shape[0], t.shape[1], FILL_BLOCK, t.shape[3], generator=gen).to(t.dtype).to(t.device)
            for start in range(0, top, FILL_BLOCK):
                n = min(FILL_BLOCK, top - start)
                t[:, :, start:start + n].copy_(block[:, :, :n])


@torch.inference_mode()
def sweep_contexts(lm, contexts: list[int] | None = None, steps: int = 6, repeats: int = 3,
                   progress=None) -> ContextSweep:
    """Time `steps` decode steps (batch 1) after caches of each context, `repeats` rounds; `progress(message,
    fraction)` after each context (False cancels: the contexts measured so far are kept)."""
    cfg = lm.config
    kv_per_token = cfg.kv_bytes_per_token(lm.dtype.itemsize)
    planned, why = context_plan(cfg.max_seq_len, kv_per_token, steps, available_memory_bytes(lm.device))
    if contexts:
        planned = sorted({int(c) for c in contexts if 1 <= int(c) <= planned[-1]}) or planned
    result = ContextSweep(lm.name, str(lm.device), lm.dtype_name, decode_path(lm, 1), lm.weight_bytes, kv_per_token,
                          cfg.max_seq_len, why, steps)
    top = planned[-1]
    cache = new_cache(lm, 1, top + steps + 1)
    _fill(cache, top)
    token = torch.tensor([min(13, cfg.vocab_size - 1)], device=lm.device)
    runs: dict[int, list[float]] = {c: [] for c in planned}
    watches: list[RunWatch] = []
    timed = 0.0
    for r in range(max(1, repeats)):
        for i, context in enumerate(planned):
            cache.truncate(0)
            cache.advance(context)  # the stand-in cache holds `context` tokens; the steps write after them
            watch = RunWatch()  # as a Run's decode loop: its threads chosen as it goes, its CPU wait per step
            watches.append(watch)
            try:
                watch.begin(None, lm.device)
                watch.after_prefill()  # no prefill here: the steps start where a Run's would after it
                seconds = decode_loop(lm, token, cache, steps, watch=watch)
            finally:
                watch.end()
            runs[context].append(statistics.median(seconds))
            timed += sum(seconds)
            result.points = [ContextPoint(c, list(v), c * kv_per_token) for c, v in runs.items() if v]
            done = (r * len(planned) + i + 1) / (max(1, repeats) * len(planned))
            if progress is not None and progress(f"round {r + 1}: {context:,} tokens of context", done) is False:
                result.cancelled = done < 1
                break
        if result.cancelled:
            break
    missing = next((w.meter for w in watches if not w.meter.available), None)
    result.cpu_wait = (CpuWait(sum(w.meter.total.longest for w in watches), timed, repeats, True) if missing is None
                       else CpuWait(0.0, timed, repeats, False, missing.reason))
    return result
