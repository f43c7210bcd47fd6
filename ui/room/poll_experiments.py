"""Predict, then measure: the experiments that answer the room's questions. Each is a registered lab job
(engine/serving/scheduling/lab_jobs.py) plus how its result becomes one figure: measured on this engine (a ratio of
medians) or computed from a measurement (Amdahl on a measured share), and said to be which. ui/room/polls.py matches
it to the option whose range holds it. Where the model's shapes are known, the figure's line also gives what the
FLOP or byte count predicts (computed, not measured). Streamlit-free.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from engine.core.config import dtype_bytes
from engine.perfmodel.flops import decode_step_bytes, prefill_flops
from engine.serving.scheduling import lab_jobs

MEASURED = "Measured on this engine"
COMPUTED = "Computed from a measured share"


class PollError(ValueError):
    """A question or an answer the room cannot use; its message is one line."""


# --- experiments: a lab job plus how its result becomes one number ---------------------------------------------
@dataclass(frozen=True)
class Measured:
    value: float | None  # the figure (a ratio, a speed-up), None for a categorical answer
    text: str  # one line: what was measured, with the raw numbers (and any computed comparison)
    key: str = ""  # a categorical experiment's verdict, matched to the option with this key
    how: str = MEASURED  # MEASURED, or COMPUTED when the figure is arithmetic on a measured quantity


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
    return Measured(v, f"{what} ×{v:.2f}: {med[small] * scale:,.1f} → {med[big] * scale:,.1f} {name} ({small} → {big}, "
                       "medians)")


def _tpot(trace) -> float:
    n = trace.n_output
    return (trace.total_seconds - trace.prefill_seconds) / (n - 1) if n > 1 else float("nan")


def _with(m: Measured, extra: str) -> Measured:
    return Measured(m.value, f"{m.text}; {extra}" if extra else m.text, m.key, m.how)


def _flops_words(lm, small: int, big: int) -> str:
    """'the FLOP count grows ×2.03 (computed)' for a prefill of `small` → `big` tokens, or '' without the shapes."""
    if lm is None:
        return ""
    grow = prefill_flops(lm.config, big).total / prefill_flops(lm.config, small).total
    return f"the FLOP count grows ×{grow:.2f} (computed from the model's shapes)"


def _bytes_words(lm, small: int, big: int) -> str:
    """'a step reads ×1.17 the bytes: 538 MB of weights + 3 → 94 MB of KV cache (computed)', or ''."""
    if lm is None:
        return ""
    n = dtype_bytes(lm.dtype)
    lo, hi = decode_step_bytes(lm.config, small, 1, n, n), decode_step_bytes(lm.config, big, 1, n, n)
    weights = lm.config.weight_bytes(n)
    return (f"a step reads ×{hi / lo:.2f} the bytes: {weights / 1e6:,.0f} MB of weights + {(lo - weights) / 1e6:,.1f} → "
            f"{(hi - weights) / 1e6:,.1f} MB of KV cache (computed from the model's shapes, {lm.dtype})")


@dataclass(frozen=True)
class Experiment:
    name: str
    job: lab_jobs.LabJob
    says: str  # what it measures, in words
    params: dict  # name -> (default, lowest, highest)
    repeats: int = 3  # each size measured this many times, medians compared

    def values(self, params: dict) -> dict[str, int]:
        return {k: int(params.get(k, d)) for k, (d, _, _) in self.params.items()}

    def call(self, params: dict) -> tuple[tuple, dict]:
        p, r = self.values(params), self.repeats
        if self.name == "prompt_ttft":
            return (), dict(prompt_lengths=[p["tokens"], 2 * p["tokens"]] * r, output_tokens=2)
        if self.name == "prompt_tpot":
            return (), dict(prompt_lengths=[p["short"], p["long"]] * r, output_tokens=p["output_tokens"])
        if self.name == "output_tpot":
            return (), dict(output_lengths=[p["tokens"], 2 * p["tokens"]] * r, prompt_tokens=32)
        if self.name == "batch_throughput":
            return (), dict(batch_sizes=[1, p["riders"]], prompt_tokens=32, output_tokens=p["output_tokens"])
        if self.name == "valley_x2":
            return (), dict(output_lengths=[p["output_tokens"]] * r, prompt_tokens=p["prompt_tokens"])
        return (), dict(prompt=FABLE_PROMPT, n_tokens=p["output_tokens"], chat=True)  # no_kv_cache

    def read(self, result, params: dict, lm=None) -> Measured:
        """The figure from the job's result; `lm` (the model as the worker describes it: config, dtype), when given,
        adds what the FLOP or byte count predicts next to it."""
        p = self.values(params)
        if self.name == "prompt_ttft":
            m = _ratio(result.points, "ttft_s", "prompt_tokens", p["tokens"], 2 * p["tokens"], "s", "TTFT")
            return _with(m, _flops_words(lm, p["tokens"], 2 * p["tokens"]))
        if self.name == "prompt_tpot":
            m = _ratio(result.points, "tpot_s", "prompt_tokens", p["short"], p["long"], "s", "TPOT")
            half = p["output_tokens"] // 2  # the mean context of the decode steps sits half an answer past the prompt
            return _with(m, _bytes_words(lm, p["short"] + half, p["long"] + half))
        if self.name == "output_tpot":
            return _ratio(result.points, "tpot_s", "output_tokens", p["tokens"], 2 * p["tokens"], "s", "TPOT")
        if self.name == "batch_throughput":
            m = _ratio(result.points, "decode_tokens_per_s", "batch_size", 1, p["riders"], "tok/s", "decode tokens/s")
            steps = _by(result.points, "itl_p50_s", "batch_size")
            slower = steps[p["riders"]] / steps[1] if steps.get(1, 0) > 0 else float("nan")
            return Measured(m.value, m.text.replace(f"(1 → {p['riders']}, medians)", f"(1 → {p['riders']} riders)")
                            + f"; each step took ×{slower:.2f} as long ({steps[1] * 1e3:,.1f} → "
                            f"{steps[p['riders']] * 1e3:,.1f} ms)")
        if self.name == "valley_x2":
            share = _median([pt.ttft_s / pt.total_s for pt in result.points if pt.total_s > 0])
            if not 0 < share < 1:
                raise PollError("the measurement returned no prefill share")
            v = 1.0 / (share / 2 + (1 - share))  # Amdahl: only the valley's share gets twice as fast
            return Measured(v, f"whole trip ×{v:.2f}, computed with Amdahl's law from the valley's measured share "
                               f"of the trip, {share:.0%} ({p['prompt_tokens']} → {p['output_tokens']} tokens, median "
                               f"of {len(result.points)} runs): halving it saves {share / 2:.0%}", how=COMPUTED)
        cached, uncached = _tpot(result.cached), _tpot(result.uncached)
        if not cached > 0 or not uncached > 0:
            raise PollError("the model ended its answer before a second token: no decode step to compare")
        v = uncached / cached
        context = result.cached.n_prompt + result.cached.n_output // 2
        return Measured(v, f"a step without the cache ×{v:.2f} as long: TPOT {cached * 1e3:,.1f} → {uncached * 1e3:,.1f} "
                           f"ms ({result.cached.n_prompt}-token prompt, {result.cached.n_output} tokens out; a cache-less "
                           f"step recomputes about {context} tokens on average, a cached one computes 1)")


FABLE_PROMPT = "Tell the story of a post road with a wide valley and a single-plank bridge."
EXPERIMENTS = {e.name: e for e in (
    Experiment("prompt_ttft", lab_jobs.PROMPT_SWEEP, "TTFT at a prompt of N and 2N tokens", {"tokens": (128, 4, 1024)}),
    Experiment("prompt_tpot", lab_jobs.PROMPT_SWEEP, "TPOT after a short and after a long prompt",
               {"short": (64, 4, 1024), "long": (2048, 8, 8192), "output_tokens": (16, 4, 64)}),
    Experiment("output_tpot", lab_jobs.OUTPUT_SWEEP, "TPOT at an output of N and 2N tokens", {"tokens": (16, 2, 256)}),
    Experiment("batch_throughput", lab_jobs.BATCH_SWEEP, "decode tokens/s with 1 rider and with N riders",
               {"riders": (8, 2, 16), "output_tokens": (16, 2, 128)}, repeats=1),
    Experiment("valley_x2", lab_jobs.OUTPUT_SWEEP, "the valley's share of one trip, then Amdahl for a valley ×2",
               {"prompt_tokens": (64, 4, 1024), "output_tokens": (64, 2, 512)}),
    Experiment("no_kv_cache", lab_jobs.KV_CACHE, "TPOT without the KV cache against TPOT with it",
               {"output_tokens": (32, 2, 64)}, repeats=1),
)}
