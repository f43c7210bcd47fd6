"""Helpers the fast-path tests share."""
import torch

from engine.core.kv_cache import KVCache


def filled(lm, max_len: int, prompt_len: int = 9, dtype=None, rows: int = 1) -> KVCache:
    """A cache of `rows` rows holding a prompt of prompt_len tokens each (through the eager reference)."""
    cache = KVCache(lm.config, rows, max_len, dtype or lm.dtype, "cpu")
    with torch.inference_mode():
        lm.model(torch.arange(prompt_len * rows).reshape(rows, prompt_len) % lm.config.vocab_size, cache)
    return cache


def write_verdict(folder, lm, path, use: bool, fast_ms: float = 7.0, rival_ms: float = 9.0) -> None:
    """A verdict for `path` on this machine and model in `folder`'s cache file, as an earlier process would keep it."""
    from engine.techniques import measured_cache

    key = measured_cache.machine_key(lm.model, lm.dtype) | path.key(lm) | {"what": path.name}
    measured_cache.remember(folder, key, {"use": use, "fast_ms": fast_ms, "rival_ms": rival_ms, "setup_s": 0.5,
                                          "note": "", "at": path.timed_at(lm), "race_s": 1.0, "wait_s": 0.0,
                                          "tries": 1})
