"""Next-token choice as a pure function: logits in, token ids out, randomness only from `generator`.

temperature 0 is greedy (argmax). Otherwise: divide by temperature, keep the top-k logits, keep
the smallest set whose probability reaches top-p (nucleus sampling, Holtzman et al. 2019), sample.
`SamplingParams` holds those settings (named as in vLLM) and checks them once, with clear errors.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from engine.errors import EngineError

MAX_TEMPERATURE = 10.0  # beyond this every token is equally likely: certainly a typo
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit integer


def _number(name: str, value, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EngineError(f"{name} must be a number {allowed} (got {value!r})")
    if not math.isfinite(value):
        raise EngineError(f"{name} must be a finite number {allowed} (got {value})")
    return float(value)


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 = greedy
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
        return self.temperature == 0

    def as_dict(self) -> dict:
        return asdict(self)


def sample(logits: torch.Tensor, generator: torch.Generator | None = None, temperature: float = 0.0,
           top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """logits (B, V) -> token ids (B,)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative - sorted_logits.softmax(dim=-1) >= top_p  # mass before this token already enough
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(dim=-1)
    if generator is not None and generator.device != probs.device:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1).to(logits.device)


def sample_with(params: SamplingParams, logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """`sample` with the settings of a SamplingParams."""
    return sample(logits, generator, params.temperature, params.top_k, params.top_p)


def make_generator(seed: int | None, device: torch.device) -> torch.Generator:
    """A private generator; seeded for repeatable samples, else from fresh entropy."""
    gen = torch.Generator(device="cpu" if device.type == "mps" else device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(int(seed))
    return gen
