"""Goodput: requests per second that met both service-level objectives (DistServe's measure), beside raw throughput.

A request meets its SLOs when its time to first token is within `ttft_s` and its time per output token
(the mean gap after the first token) within `tpot_s`. A server can finish many requests per second and
still serve few of them well: goodput counts only those, which is what a user feels and what a buyer pays for.
"""
from __future__ import annotations

import dataclasses
import math

from engine.errors import EngineError


@dataclasses.dataclass(frozen=True)
class SLO:
    ttft_s: float
    tpot_s: float

    def check(self) -> None:
        for name, value in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise EngineError(f"the {name} objective must be a number of seconds > 0, not {value!r}")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one request got: seconds from its arrival to its first token, mean gap after it, and when it ended
    (seconds from the workload's start). ttft_s None = it failed or never started."""
    arrived_s: float
    ttft_s: float | None
    tpot_s: float | None  # None for a one-token answer: no gap to judge
    finished_s: float
    output_tokens: int = 0

    def meets(self, slo: SLO) -> bool:
        if self.ttft_s is None or self.ttft_s > slo.ttft_s:
            return False
        return self.tpot_s is None or self.tpot_s <= slo.tpot_s


def span_s(outcomes: list[Outcome]) -> float:
    """From the first arrival to the last finish: the time over which rates are counted."""
    if not outcomes:
        return 0.0
    return max(o.finished_s for o in outcomes) - min(o.arrived_s for o in outcomes)


def throughput(outcomes: list[Outcome]) -> float:
    """Finished requests per second, good or not."""
    span = span_s(outcomes)
    done = sum(o.ttft_s is not None for o in outcomes)
    return done / span if span > 0 else 0.0


def goodput(outcomes: list[Outcome], slo: SLO) -> float:
    """Requests per second that met both objectives."""
    slo.check()
    span = span_s(outcomes)
    return sum(o.meets(slo) for o in outcomes) / span if span > 0 else 0.0


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation (numpy's default); NaN for no values."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
