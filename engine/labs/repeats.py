"""Repeated measurements: the median, how far the runs lie apart, and a verdict held back when that spread is as
large as the effect; and the CPU wait of a lab's runs, read from their Traces as Home reads a Run's.

A timing on a shared machine (a laptop with a video call, a VM with other users) moves from run to run by more than
many effects a lab wants to show. So a lab repeats each measurement, reports the median and the spread (fastest to
slowest run), and states a verdict only when every repeat moved the same way by more than the repeats lie apart: a
machine too busy to tell gets "too close to tell", never a confident verdict that the next run flips.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

BUSY_SHARE = 0.10  # the engine's threads waited this share of the timed work or more: the machine was busy
MIN_REPEATS = 3  # fewer paired repeats give no verdict. With no true effect and log-normal noise, the rule below
# states one ~4 % of the time with three repeats and ~0.7 % with four; two independent runs then state opposite
# verdicts ~0.08 % and ~0.002 % of the time (simulated; tests/engine/labs/test_repeats.py checks a seeded sample)
FASTER, SLOWER, NOISE, FEW, NONE = "faster", "slower", "noise", "few", "n/a"  # Effect.verdict's values


def _finite(values) -> tuple[float, ...]:
    return tuple(float(x) for x in values if x is not None and math.isfinite(x) and x > 0)


@dataclass(frozen=True)
class Repeated:
    """One quantity measured several times (seconds, tokens/s ...): positive finite values only."""
    values: tuple[float, ...]

    @classmethod
    def of(cls, values) -> Repeated:
        return cls(_finite(values))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.values)) if self.values else float("nan")

    @property
    def low(self) -> float:
        return min(self.values, default=float("nan"))

    @property
    def high(self) -> float:
        return max(self.values, default=float("nan"))

    @property
    def spread(self) -> float:
        """How far apart the runs lie: slowest / fastest - 1 (NaN with fewer than two runs)."""
        return self.high / self.low - 1 if self.n >= 2 else float("nan")


@dataclass(frozen=True)
class Effect:
    """A paired effect over repeats: one ratio per repeat (> 1: the first of the pair is larger), e.g. a remedy's
    speed-up (baseline time / remedy time) or one gain divided by another, each from the same round of runs."""
    ratios: tuple[float, ...]

    @property
    def measured(self) -> tuple[float, ...]:
        return _finite(self.ratios)

    @property
    def median(self) -> float:
        """The median ratio (taken on a log scale: ×2 and ×0.5 are as far from ×1)."""
        xs = self.measured
        return float(math.exp(statistics.median(math.log(x) for x in xs))) if xs else float("nan")

    @property
    def spread(self) -> float:
        """How far apart the repeats lie, as a fraction: max / min - 1 (NaN with fewer than two)."""
        return Repeated(self.measured).spread

    @property
    def weakest(self) -> float:
        """The repeat closest to ×1 (NaN without repeats)."""
        return min(self.measured, key=lambda x: abs(math.log(x)), default=float("nan"))

    @property
    def verdict(self) -> str:
        """"faster" (ratios > 1) or "slower" (< 1) when every repeat moved that way and even the weakest of them lies
        farther from ×1 than the repeats lie apart; "noise" otherwise; "few" with fewer than MIN_REPEATS repeats;
        "n/a" with none. Held back rather than flipped: two verdicts of opposite sign need two sets of repeats that
        each agree among themselves by more than their spread."""
        xs = self.measured
        if not xs:
            return NONE
        if len(xs) < MIN_REPEATS:
            return FEW
        same_way = min(xs) > 1 or max(xs) < 1
        if same_way and abs(math.log(self.weakest)) > math.log(max(xs) / min(xs)):
            return FASTER if self.median > 1 else SLOWER
        return NOISE


def effect_of(first: list[float], second: list[float]) -> Effect:
    """The paired Effect first[i] / second[i] over the repeats both have (a partial round is left out)."""
    pairs = [(a, b) for a, b in zip(first, second) if a and b and math.isfinite(a) and math.isfinite(b) and b > 0]
    return Effect(tuple(a / b for a, b in pairs))


@dataclass(frozen=True)
class CpuWait:
    """The time the engine's threads waited for a CPU during a lab's timed runs (Linux schedstat, as each Run
    records it: engine/core/generate.py), against the time those runs took."""
    waited_s: float  # prefill + every decode step, the longest-waiting thread of each interval
    timed_s: float  # the same intervals' wall time
    runs: int
    measured: bool  # False where the system gives no schedstat (then `note` says why)
    note: str = ""

    @property
    def share(self) -> float:
        return self.waited_s / self.timed_s if self.measured and self.timed_s > 0 else float("nan")

    @property
    def busy(self) -> bool:
        return self.measured and self.share >= BUSY_SHARE


def cpu_wait_of(traces) -> CpuWait:
    """The CPU wait of every given run together (Traces with their schedstat fields); not measured when any run was
    not (its note kept)."""
    traces = list(traces)
    if not traces:
        return CpuWait(0.0, 0.0, 0, False, "no runs")
    missing = next((t for t in traces if t.cpu_wait_seconds is None), None)
    if missing is not None:
        return CpuWait(0.0, 0.0, len(traces), False, missing.cpu_wait_note or "the CPU wait was not measured")
    waited = sum(t.prefill_cpu_wait_seconds + t.decode_cpu_wait_seconds for t in traces)
    timed = sum(t.prefill_seconds + t.decode_seconds for t in traces)
    return CpuWait(waited, timed, len(traces), True)


def add_waits(waits) -> CpuWait:
    """Several CpuWaits as one (not measured when any was not)."""
    waits = [w for w in waits if w.runs]
    if not waits:
        return CpuWait(0.0, 0.0, 0, False, "no runs")
    missing = next((w for w in waits if not w.measured), None)
    if missing is not None:
        return CpuWait(0.0, 0.0, sum(w.runs for w in waits), False, missing.note)
    return CpuWait(sum(w.waited_s for w in waits), sum(w.timed_s for w in waits), sum(w.runs for w in waits), True)
