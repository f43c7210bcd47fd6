"""The engine a student reads: prefill once, then decode one token per step, on the eager reference forward.

The shape of gpt-fast's generate.py (`prefill`, `decode_one_token`, the loop) on this project's model
(engine/core/model.py) and its explicit KV cache (engine/core/kv_cache.py), with torch's own ops: nothing chosen by
measurement, nothing compiled, nothing timed.

  prefill           every prompt token in ONE forward pass: wide, parallel, compute-bound on a big enough prompt
  decode_one_token  one new token per sequence: it still reads every weight and the whole KV cache, so the step is
                    bound by memory traffic, and it grows with the context
  generate          the loop: the prompt's pass gives the first token; each decode step feeds the last token back

The engine the dashboard runs (engine/core/generate.py) takes the same two phases through the fast paths its
model chose at load (engine/core/backends.py) and times them into a Trace; its greedy tokens are these (tests
check), and each fast path was checked against this forward before it was kept.
"""
from __future__ import annotations

import torch

from engine.core.kv_cache import KVCache
from engine.core.sampling import sample


@torch.inference_mode()
def prefill(model, prompt_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Phase 1: the prompt (B, T) in one pass. Writes T keys and values per layer; logits of the last position (B, V)."""
    logits, _ = model(prompt_ids, cache)
    return logits


@torch.inference_mode()
def decode_one_token(model, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Phase 2, one step: the latest token of each sequence (B, 1) through every layer, attending over the whole
    cache. Writes one key and value per layer; logits (B, V)."""
    logits, _ = model(token, cache)
    return logits


def generate(model, prompt_ids: list[int], max_new_tokens: int, *, eos_ids: tuple[int, ...] = (),
             temperature: float = 0.0, generator: torch.Generator | None = None) -> list[int]:
    """Up to `max_new_tokens` new tokens for one prompt (greedy at temperature 0), ending early at an end token."""
    weights = model.tok_emb.weight
    cache = KVCache(model.cfg, 1, len(prompt_ids) + max_new_tokens, weights.dtype, weights.device)
    logits = prefill(model, torch.tensor([prompt_ids], device=weights.device), cache)  # (1, V)
    token = sample(logits, generator, temperature)  # (1,)
    out = [int(token)]
    while len(out) < max_new_tokens and out[-1] not in eos_ids:
        logits = decode_one_token(model, token[:, None], cache)  # (1, 1) in, (1, V) out
        token = sample(logits, generator, temperature)
        out.append(int(token))
    return out
