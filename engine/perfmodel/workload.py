"""Traffic on the road: many convoys arriving over time, each with its own prompt and output length.

A Workload is what a serving benchmark sends: an arrival process (vLLM's `--request-rate` and
`--burstiness`: gaps drawn from a gamma distribution with shape = burstiness, so 1.0 is a Poisson
process, below 1 burstier, above 1 steadier; an infinite rate sends everything at once) and length
distributions for prompts and outputs. `arrivals(workload, seed)` turns it into one fixed list of
Arrivals, so every policy (and the simulator) is compared on the very same sequence of requests.
Pure arithmetic: no torch, shared by the Traffic lab, `engine measure` and the fleet planner.
"""
from __future__ import annotations

import dataclasses
import math
import random

from engine.errors import EngineError

# the ranges a workload may take: wide beyond any lab's or benchmark's, and far inside where the gap and length draws
# would overflow or divide by zero (a rate of 1e-176, a spread of 1e190)
MIN_RATE, MAX_RATE = 1e-3, 1e7  # requests per second (math.inf: a burst)
MIN_BURSTINESS, MAX_BURSTINESS = 0.01, 100.0
MAX_SPREAD = 5.0  # the log-normal's sigma: at 5, one request in a hundred is ~10^5x the median
MAX_TOKENS = 10**6  # per prompt or output: beyond any model's context


@dataclasses.dataclass(frozen=True)
class Lengths:
    """Token counts drawn from a log-normal around `mean` (spread = its sigma; 0 = always `mean`), clamped."""
    mean: int
    spread: float = 0.0
    low: int = 1
    high: int = 4096

    def check(self, what: str) -> None:
        if not isinstance(self.mean, int) or isinstance(self.mean, bool) or not 0 <= self.mean <= MAX_TOKENS:
            raise EngineError(f"{what} length must be a whole number of tokens from 0 to {MAX_TOKENS:,}, not {self.mean!r}")
        if not 0 <= self.spread <= MAX_SPREAD:  # also catches NaN
            raise EngineError(f"{what} length spread must be a number from 0 to {MAX_SPREAD:g}, not {self.spread!r}")
        if not 0 <= self.low <= self.high <= MAX_TOKENS:
            raise EngineError(f"{what} length bounds must satisfy 0 <= low <= high <= {MAX_TOKENS:,}, not "
                              f"{self.low}..{self.high}")

    def draw(self, rng: random.Random) -> int:
        if self.spread == 0 or self.mean == 0:
            return min(max(self.mean, self.low), self.high)
        mu = math.log(self.mean) - self.spread ** 2 / 2  # the log-normal's mean is then `mean`
        return min(max(round(rng.lognormvariate(mu, self.spread)), self.low), self.high)


@dataclasses.dataclass(frozen=True)
class Workload:
    """Requests per second (math.inf = a burst: all at t=0), burstiness, lengths, how many requests."""
    prompt: Lengths
    output: Lengths
    request_rate: float = 1.0
    burstiness: float = 1.0
    num_requests: int = 32
    name: str = "custom"

    def check(self) -> None:
        if not (self.request_rate == math.inf or MIN_RATE <= self.request_rate <= MAX_RATE):  # also catches NaN
            raise EngineError(f"request rate must be from {MIN_RATE:g} to {MAX_RATE:g} requests/s (inf for a burst), "
                              f"not {self.request_rate!r}")
        if not MIN_BURSTINESS <= self.burstiness <= MAX_BURSTINESS:
            raise EngineError(f"burstiness must be a number from {MIN_BURSTINESS:g} to {MAX_BURSTINESS:g} (1 = Poisson), "
                              f"not {self.burstiness!r}")
        if not isinstance(self.num_requests, int) or isinstance(self.num_requests, bool) or self.num_requests < 1:
            raise EngineError(f"number of requests must be a whole number >= 1, not {self.num_requests!r}")
        self.prompt.check("prompt")
        self.output.check("output")


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One request of a workload: when it arrives (seconds from the start) and its lengths in tokens."""
    at_s: float
    prompt_tokens: int
    output_tokens: int


def arrivals(workload: Workload, seed: int = 0) -> list[Arrival]:
    """The workload's requests in arrival order; the same seed gives the same list."""
    workload.check()
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(workload.num_requests):
        if i and math.isfinite(workload.request_rate):
            shape = workload.burstiness
            t += rng.gammavariate(shape, 1.0 / (workload.request_rate * shape))  # mean gap = 1 / rate
        out.append(Arrival(t, workload.prompt.draw(rng), workload.output.draw(rng)))
    return out


# The fable's kinds of work (README, "The story"): long in and short out fills the valley; short in and long out
# crosses the bridge for a long time; chat sits between.
PRESETS = {
    "summarisation": Workload(Lengths(512, 0.3, 16, 2048), Lengths(32, 0.3, 1, 256), name="summarisation"),
    "chat": Workload(Lengths(128, 0.5, 8, 1024), Lengths(96, 0.5, 1, 512), name="chat"),
    "code": Workload(Lengths(48, 0.3, 8, 512), Lengths(256, 0.3, 16, 1024), name="code"),
}


def preset(name: str, **changes) -> Workload:
    """A preset with some fields changed, e.g. preset("chat", request_rate=2.0, num_requests=16)."""
    if name not in PRESETS:
        raise EngineError(f"unknown workload preset '{name}'; use one of: {', '.join(PRESETS)}")
    return dataclasses.replace(PRESETS[name], **changes)


def shaped(name: str | None = None, *, request_rate: float | None = None, burstiness: float | None = None,
           prompt_tokens: int | None = None, prompt_spread: float | None = None, output_tokens: int | None = None,
           output_spread: float | None = None, num_requests: int | None = None) -> Workload:
    """A preset (or a custom workload, name None) with the values given changed; bounds widen to a larger mean.

    The Traffic lab's inputs and `engine measure`'s flags both go through here, so the same values (and seed)
    give the same arrivals in the lab and against a server."""
    if name is None and (prompt_tokens is None or output_tokens is None):
        raise EngineError("give the prompt and output lengths (--prompt-tokens, --max-new-tokens) or a workload preset")
    base = preset(name) if name is not None else Workload(Lengths(prompt_tokens), Lengths(output_tokens))

    def lengths(old: Lengths, mean, spread) -> Lengths:
        mean = old.mean if mean is None else mean
        high = max(old.high, mean) if isinstance(mean, int) else old.high
        return Lengths(mean, old.spread if spread is None else float(spread), old.low, high)

    changes = {k: v for k, v in (("request_rate", request_rate), ("burstiness", burstiness),
                                 ("num_requests", num_requests)) if v is not None}
    w = dataclasses.replace(base, prompt=lengths(base.prompt, prompt_tokens, prompt_spread),
                            output=lengths(base.output, output_tokens, output_spread), **changes)
    w.check()
    return w
