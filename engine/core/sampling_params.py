"""Sampling settings as vLLM names them (temperature, top_k, top_p, seed, ignore_eos), checked once with clear errors.

No torch here: the command line checks a request's settings before it loads a model (engine/core/sampling.py samples).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from engine.errors import EngineError

MAX_TEMPERATURE = 10.0  # beyond this every token is equally likely: certainly a typo
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit integer
# a temperature under this samples greedily, as vLLM's does (its _SAMPLING_EPS): dividing the logits by 1e-283 makes
# them infinite, and their softmax NaN
GREEDY_BELOW = 1e-5


def _number(name: str, value, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EngineError(f"{name} must be a number {allowed} (got {value!r})")
    if not math.isfinite(value):
        raise EngineError(f"{name} must be a finite number {allowed} (got {value})")
    return float(value)


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 (or under GREEDY_BELOW) = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    seed: int | None = None  # None = fresh randomness each run
    ignore_eos: bool = False  # keep going past the end-of-sequence token (exact output lengths)

    def checked(self, vocab_size: int | None = None) -> SamplingParams:
        """Self, after checking every field; raises EngineError naming the value and the allowed range."""
        t = _number("temperature", self.temperature, f"from 0 (greedy) to {MAX_TEMPERATURE:g}")
        if not 0.0 <= t <= MAX_TEMPERATURE:
            raise EngineError(f"temperature must be from 0 (greedy) to {MAX_TEMPERATURE:g} (got {self.temperature})")
        p = _number("top_p", self.top_p, "in (0, 1]")
        if not 0.0 < p <= 1.0:
            raise EngineError(f"top_p must be in (0, 1], e.g. 0.9 (got {self.top_p})")
        top_k_max = f"{vocab_size:,}" if vocab_size else "the vocabulary size"
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int):
            raise EngineError(f"top_k must be a whole number from 0 (off) to {top_k_max} (got {self.top_k!r})")
        if self.top_k < 0 or (vocab_size is not None and self.top_k > vocab_size):
            raise EngineError(f"top_k must be from 0 (off) to {top_k_max} (got {self.top_k})")
        if self.seed is not None:
            if isinstance(self.seed, bool) or not isinstance(self.seed, int):
                raise EngineError(f"seed must be a whole number from 0 to {MAX_SEED} (got {self.seed!r})")
            if not 0 <= self.seed <= MAX_SEED:
                raise EngineError(f"seed must be from 0 to {MAX_SEED} (2^63 - 1) (got {self.seed})")
        if not isinstance(self.ignore_eos, bool):
            raise EngineError(f"ignore_eos must be true or false (got {self.ignore_eos!r})")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    def as_dict(self) -> dict:
        return asdict(self)
