"""Prefill in chunks: a long prompt through the same model a few hundred tokens at a time, into the same cache.

One pass over a 1024-token prompt makes every per-layer temporary 1024 rows tall (the MLP's gate/up output is
1024 x 3072 floats, 12.6 MB, far beyond a core's 1-2 MB L2), and one causal attention over 1024 x 1024.
Cut into chunks of C tokens, each chunk runs the same matmuls on C rows, writes its keys and values into
the cache, and attends over the cache so far plus itself causally (the model's "prefill on top of a cached
prefix" path): the same arithmetic, the temporaries C rows tall. The logits agree with one pass to float32
rounding (matmuls on fewer rows may sum in another order), so greedy tokens are compared, not assumed.
vLLM's chunked prefill (--max-num-batched-tokens) cuts prompts the same way, for scheduling rather than caches.

On a quiet machine chunks measured no faster than one pass (engine/labs/prefill_split.py), so `prefill` stays one
pass; with other programs on the same cores smaller temporaries survive their cache traffic better.
"""
from __future__ import annotations

import torch

from engine.core.kv_cache import KVCache
from engine.errors import EngineError


@torch.inference_mode()
def prefill_chunked(lm, input_ids: torch.Tensor, cache: KVCache, chunk: int) -> torch.Tensor:
    """All T prompt tokens (B, T), `chunk` at a time, into `cache`; logits (B, V) of the last token, as `prefill`."""
    if not isinstance(chunk, int) or chunk < 1:
        raise EngineError(f"a prefill chunk is a whole number of tokens, 1 or more (got {chunk})")
    T = input_ids.shape[1]
    if T == 0:
        raise EngineError("prefill needs at least one prompt token")
    logits = None
    for start in range(0, T, chunk):
        logits = lm.forward(input_ids[:, start:start + chunk], cache)[0]  # (B, V): only the last chunk's is kept
    return logits
