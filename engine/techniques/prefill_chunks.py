"""Prefill in chunks: the same prompt through the same model a few hundred tokens at a time, into the same cache.

One pass over a 1024-token prompt makes every per-layer temporary 1024 rows tall (the MLP's gate/up output is
1024 x 3072 floats, 12.6 MB, far beyond a core's 1-2 MB L2), and one causal attention over 1024 x 1024.
Cut into chunks of C tokens, each chunk runs the same matmuls on C rows, writes its keys and values into
the cache, and attends over the cache so far plus itself causally (the model's "prefill on top of a cached
prefix" path): the same arithmetic, the temporaries C rows tall. The logits agree with one pass to float32
rounding (matmuls on fewer rows may sum in another order), so greedy tokens are compared, not assumed.
vLLM's chunked prefill (--max-num-batched-tokens) cuts prompts the same way, for scheduling rather than caches.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import torch

from engine.core.kv_cache import KVCache
from engine.errors import EngineError
from engine.techniques.kernel_choice import cache_key


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
        logits = lm.model(input_ids[:, start:start + chunk], cache)[0]  # (B, V): only the last chunk's is kept
    return logits


# ------------------------------------------------------------------------------------------------
# Chosen by measurement, like the matmul kernels: one layer of a long prompt, whole vs in chunks
# ------------------------------------------------------------------------------------------------
CHUNKS = (256, 512)  # the chunk sizes tried (measured best on a 2-core EPYC: 256, then 512)
PROBE_TOKENS = 1024  # the prompt length the choice is measured at (where one pass's temporaries leave the caches)
MARGIN = 0.03  # chunks must beat one pass by more than this (timing noise), so the choice is never slower
ROUNDS = 4
CACHE_FILE = "prefill-chunk.json"


def _time_layer(lm, ids: torch.Tensor, chunk: int) -> float:
    """Seconds for the first block (and the embedding) over `ids`, in one pass (chunk 0) or in chunks."""
    cache = KVCache(lm.config, 1, ids.shape[1], lm.dtype, lm.device)
    step = chunk or ids.shape[1]
    start = time.perf_counter()
    for s in range(0, ids.shape[1], step):
        lm.model(ids[:, s:s + step], cache, last_layer=0)  # stops after block 0: 1/n_layers of a prefill
    return time.perf_counter() - start


@torch.inference_mode()
def measure_chunk(lm) -> tuple[int, dict[int, float]]:
    """(the chunk to use, 0 = one pass; {variant: best ms of one layer}) at PROBE_TOKENS tokens, variants taking turns."""
    n = min(PROBE_TOKENS, lm.config.max_seq_len)
    variants = [0, *(c for c in CHUNKS if c < n)]
    ids = torch.randint(0, lm.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(0)).to(lm.device)  # (1, T)
    times: dict[int, list[float]] = {v: [] for v in variants}
    for r in range(ROUNDS + 1):  # round 0 warms up
        for v in variants[r % len(variants):] + variants[: r % len(variants)]:
            t = _time_layer(lm, ids, v)
            if r:
                times[v].append(t)
    ms = {v: 1000 * min(t) for v, t in times.items()}
    best = min(ms, key=ms.get)
    return (best if ms[best] < ms[0] * (1 - MARGIN) else 0), ms


def why(chunk: int, ms: dict, cached: bool) -> str:
    """'prefill in chunks of 256 (one layer at 1024 tokens: one pass 32.1 ms vs 256: 28.0 ms vs ...)'."""
    parts = " vs ".join(f"{'one pass' if v == 0 else f'chunks of {v}'} {t:.1f} ms" for v, t in sorted(ms.items(), key=lambda kv: kv[1]))
    head = f"prefill in chunks of {chunk}" if chunk else "prefill in one pass"
    return f"{head} (one layer at {PROBE_TOKENS} tokens: {parts}; {'cached' if cached else 'measured now'})"


def choose_chunk(lm, cache_dir: Path, remeasure: bool = False) -> tuple[int, str]:
    """(chunk, why) for this model on this CPU with its current kernels: from the cache file, else measured and cached."""
    if lm.device.type != "cpu" or lm.config.max_seq_len <= min(CHUNKS):
        return 0, ""
    key = cache_key(lm.model, lm.dtype) | {"kernels": lm.kernels, "chunks": list(CHUNKS), "probe": PROBE_TOKENS}
    kid = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = cache_dir / CACHE_FILE
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    entry = data.get(kid)
    if not remeasure and isinstance(entry, dict) and entry.get("key") == key:
        try:
            ms = {int(v): float(t) for v, t in entry["ms"].items()}
            return int(entry["chunk"]), why(int(entry["chunk"]), ms, cached=True)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    chunk, ms = measure_chunk(lm)
    data[kid] = {"key": key, "chunk": chunk, "ms": ms, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:  # written aside and renamed into place; a cache that cannot be written is skipped
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    return chunk, why(chunk, ms, cached=False)
