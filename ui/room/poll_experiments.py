"""Predict, then measure: the experiments that answer the room's questions. Each is a registered lab job
(engine/serving/scheduling/lab_jobs.py) plus how its result becomes one measured figure (a ratio, a speed-up, or a
verdict), matched by ui/room/polls.py to the nearest option. Streamlit-free.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from engine.serving.scheduling import lab_jobs


class PollError(ValueError):
    """A question or an answer the room cannot use; its message is one line."""


# --- experiments: a lab job plus how its result becomes one number ---------------------------------------------
@dataclass(frozen=True)
class Measured:
    value: float | None  # the measured figure (a ratio, a speed-up), None for a categorical answer
    text: str  # one line: what was measured, with the raw numbers
    key: str = ""  # a categorical experiment's verdict, matched to the option with this key


def _median(xs) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def _by(points, attr: str, size_attr: str) -> dict[int, float]:
    groups: dict[int, list[float]] = {}
    for p in points:
        groups.setdefault(getattr(p, size_attr), []).append(getattr(p, attr))
    return {k: _median(v) for k, v in groups.items()}


def _ratio(points, attr: str, size_attr: str, small: int, big: int, unit: str, what: str) -> Measured:
    med = _by(points, attr, size_attr)
    if small not in med or big not in med or not med[small] > 0:
        missing = big if small in med else small
        raise PollError(f"no {what} was measured at {missing} (more tokens than this model's context holds?)")
    scale, name = (1e3, "ms") if unit == "s" else (1.0, "tok/s")
    v = med[big] / med[small]
    return Measured(v, f"{what} ×{v:.2f}: {med[small] * scale:,.1f} → {med[big] * scale:,.1f} {name} ({small} → {big})")


def _tpot(trace) -> float:
    n = trace.n_output
    return (trace.total_seconds - trace.prefill_seconds) / (n - 1) if n > 1 else float("nan")


@dataclass(frozen=True)
class Experiment:
    name: str
    job: lab_jobs.LabJob
    says: str  # what it measures, in words
    params: dict  # name -> (default, lowest, highest)
    repeats: int = 3  # each size measured this many times, medians compared

    def call(self, params: dict) -> tuple[tuple, dict]:
        p = {k: int(params.get(k, d)) for k, (d, _, _) in self.params.items()}
        r = self.repeats
        if self.name == "prompt_ttft":
            return (), dict(prompt_lengths=[p["tokens"], 2 * p["tokens"]] * r, output_tokens=2)
        if self.name == "output_tpot":
            return (), dict(output_lengths=[p["tokens"], 2 * p["tokens"]] * r, prompt_tokens=32)
        if self.name == "batch_throughput":
            return (), dict(batch_sizes=[1, p["riders"]], prompt_tokens=32, output_tokens=p["output_tokens"])
        if self.name == "valley_x2":
            return (), dict(output_lengths=[p["output_tokens"]] * r, prompt_tokens=p["prompt_tokens"])
        return (), dict(prompt=FABLE_PROMPT, n_tokens=p["output_tokens"], chat=True)  # kv_cache_bridge

    def read(self, result, params: dict) -> Measured:
        p = {k: int(params.get(k, d)) for k, (d, _, _) in self.params.items()}
        if self.name == "prompt_ttft":
            return _ratio(result.points, "ttft_s", "prompt_tokens", p["tokens"], 2 * p["tokens"], "s", "TTFT")
        if self.name == "output_tpot":
            return _ratio(result.points, "tpot_s", "output_tokens", p["tokens"], 2 * p["tokens"], "s", "TPOT")
        if self.name == "batch_throughput":
            m = _ratio(result.points, "decode_tokens_per_s", "batch_size", 1, p["riders"], "tok/s", "decode tokens/s")
            return Measured(m.value, m.text.replace(f"({1} → {p['riders']})", f"(1 → {p['riders']} riders)"))
        if self.name == "valley_x2":
            share = _median([pt.ttft_s / pt.total_s for pt in result.points if pt.total_s > 0])
            if not 0 < share < 1:
                raise PollError("the measurement returned no prefill share")
            v = 1.0 / (share / 2 + (1 - share))  # Amdahl: only the valley's share gets twice as fast
            return Measured(v, f"whole trip ×{v:.2f}: the valley took {share:.0%} of the trip "
                               f"({p['prompt_tokens']} → {p['output_tokens']} tokens); halving it saves {share / 2:.0%}")
        cached, uncached = _tpot(result.cached), _tpot(result.uncached)
        gain = uncached / cached if cached > 0 else float("nan")
        verdict = "kv_cache" if gain >= 1.2 else "neither"
        return Measured(None, f"KV cache: each crossing ×{gain:.2f} faster (TPOT {uncached * 1e3:,.1f} → "
                              f"{cached * 1e3:,.1f} ms); the valley's width never enters TPOT", verdict)


FABLE_PROMPT = "Tell the story of a post road with a wide valley and a single-plank bridge."
EXPERIMENTS = {e.name: e for e in (
    Experiment("prompt_ttft", lab_jobs.PROMPT_SWEEP, "TTFT at a prompt of N and 2N tokens", {"tokens": (128, 4, 1024)}),
    Experiment("output_tpot", lab_jobs.OUTPUT_SWEEP, "TPOT at an output of N and 2N tokens", {"tokens": (16, 2, 256)}),
    Experiment("batch_throughput", lab_jobs.BATCH_SWEEP, "decode tokens/s with 1 rider and with N riders",
               {"riders": (8, 2, 16), "output_tokens": (16, 2, 128)}, repeats=1),
    Experiment("valley_x2", lab_jobs.OUTPUT_SWEEP, "the valley's share of one trip, then Amdahl for a valley ×2",
               {"prompt_tokens": (64, 4, 1024), "output_tokens": (64, 2, 512)}),
    Experiment("kv_cache_bridge", lab_jobs.KV_CACHE, "TPOT with and without the KV cache", {"output_tokens": (16, 2, 64)},
               repeats=1),
)}
