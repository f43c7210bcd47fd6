"""Next-token choice as a pure function: logits in, token ids out, randomness only from `generator`.

temperature 0 is greedy (argmax), and so is any under GREEDY_BELOW (1e-5, as in vLLM). Otherwise: divide by
temperature, keep the top-k logits, keep the smallest set whose probability reaches top-p (nucleus sampling,
Holtzman et al. 2019), sample.
`SamplingParams` (sampling_params.py) holds those settings, named as in vLLM, and checks them once.
"""
from __future__ import annotations

import torch

from engine.core.sampling_params import GREEDY_BELOW, SamplingParams


def sample(logits: torch.Tensor, generator: torch.Generator | None = None, temperature: float = 0.0,
           top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """logits (B, V) -> token ids (B,)."""
    if temperature < GREEDY_BELOW:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative - sorted_logits.softmax(dim=-1) >= top_p  # mass before this token already enough
        drop[:, 0] = False  # the likeliest token always stays (a top_p under float32's range reads as 0: vLLM's rule)
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
