"""One request timed as a Run times it (engine/core/generate.py), optionally on top of a prefix already in the KV
cache: what prefix caching saves a request whose prompt starts with text an earlier request left behind.

Same primitives as a Run: one `prefill` pass over the prompt's new tokens, then `decode_loop` one token per step; the
same watch as a Run's (engine/host/run_watch.py: fewer threads while other programs hold the cores, and the
CPU wait of each interval). Greedy, and every step runs (no end token stops it),
so every configuration of an experiment decodes the same number of steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.core.clock import now
from engine.core.generate import decode_loop, greedy, new_cache, prefill, warm_up
from engine.errors import EngineError
from engine.host.run_watch import RunWatch
from engine.labs.repeats import CpuWait, add_waits


@dataclass
class Timing:
    """One timed request: TTFT, its decode steps, and the CPU wait of each."""
    prompt_tokens: int
    reused_tokens: int  # of them, already in the cache (not computed)
    ttft_s: float
    step_s: list[float] = field(default_factory=list)
    prefill_wait_s: float = 0.0
    decode_wait_s: float = 0.0
    wait_measured: bool = True
    wait_note: str = ""

    @property
    def decode_s(self) -> float:
        return sum(self.step_s)

    @property
    def tpot_s(self) -> float:
        return self.decode_s / len(self.step_s) if self.step_s else float("nan")

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s


@torch.inference_mode()
def timed_request(lm, prompt_ids: list[int], output_tokens: int, reused: int = 0) -> Timing:
    """Prefill `prompt_ids` (its first `reused` tokens already cached: put there untimed, as an earlier request
    would have), then `output_tokens - 1` greedy decode steps; timed as a Run."""
    if not 0 <= reused < len(prompt_ids):
        raise EngineError(f"reuse 0 to {len(prompt_ids) - 1} of the prompt's {len(prompt_ids)} tokens, not {reused}")
    if output_tokens < 1:
        raise EngineError("a request makes at least one token")
    device = lm.device
    warm_up(lm, 1)
    cache = new_cache(lm, 1, len(prompt_ids) + output_tokens)
    if reused:
        prefill(lm, torch.tensor([prompt_ids[:reused]], device=device), cache)  # the earlier request's work
    watch = RunWatch()  # as the scheduler's Run: its threads chosen as it goes, its CPU wait per interval
    waits: list[float] = []
    try:
        watch.begin(None, device)
        watch.mark()
        start = now(device)
        token = greedy(prefill(lm, torch.tensor([prompt_ids[reused:]], device=device), cache))  # (1,)
        token.tolist()  # the first token exists on the host: TTFT ends here
        ttft = now(device) - start
        prefill_wait = watch.lap()
        watch.after_prefill()

        def after_step(token: torch.Tensor, seconds: float) -> bool:
            waits.append(watch.last_wait)
            return True

        steps = decode_loop(lm, token, cache, output_tokens - 1, after_step=after_step, watch=watch)
    finally:
        watch.end()
    meter = watch.meter
    return Timing(len(prompt_ids), reused, ttft, steps, prefill_wait, sum(waits), meter.available, meter.reason)


def cpu_wait_of_timings(timings: list[Timing]) -> CpuWait:
    """The CPU wait of several timed requests together (not measured when any was not)."""
    return add_waits(CpuWait(t.prefill_wait_s + t.decode_wait_s, t.total_s, 1, t.wait_measured, t.wait_note)
                     for t in timings)
