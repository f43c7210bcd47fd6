"""The KV cache: an explicit, preallocated store of every past token's keys and values per layer.

Decode reads all of it on every step, which is why decode is bound by memory traffic. The cache is
an object the caller owns and passes in (as in gpt-fast and nano-vllm), never hidden in modules.
"""
from __future__ import annotations

import torch

from engine.config import ModelConfig


class KVCache:
    """Keys and values for `n_layers` layers, each shaped (B, K, max_len, D), filled up to `length`."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, dtype: torch.dtype,
                 device: torch.device | str = "cpu"):
        self.cfg = cfg
        self.batch = batch
        self.max_len = max_len
        self.dtype = dtype
        shape = (batch, cfg.n_kv_heads, max_len, cfg.head_dim)  # (B, K, S_max, D)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)]
        self.length = 0  # tokens stored (same for every sequence of the batch)

    @property
    def bytes_per_token(self) -> int:
        """Bytes one more token costs, summed over the batch: 2 x layers x K x D x dtype bytes x B."""
        return self.cfg.kv_bytes_per_token(self.keys[0].element_size()) * self.batch

    @property
    def nbytes_used(self) -> int:
        return self.length * self.bytes_per_token

    @property
    def nbytes_allocated(self) -> int:
        return self.max_len * self.bytes_per_token

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, K, T, D) at positions [length, length+T); return views over [0, length+T).

        `length` itself moves only in `advance`, once every layer has written.
        """
        start, end = self.length, self.length + k.shape[2]
        if end > self.max_len:
            raise RuntimeError(f"KV cache full: {end} > {self.max_len} positions")
        self.keys[layer][:, :, start:end] = k
        self.values[layer][:, :, start:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]  # (B, K, S, D) each

    def advance(self, n_tokens: int) -> None:
        self.length += n_tokens

    def truncate(self, length: int) -> None:
        """Forget everything after `length` (rejected speculative tokens, or a shared chat prefix)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        self.length = length

    def reset(self) -> None:
        self.length = 0

    def copy_prefix_from(self, other: KVCache, length: int) -> None:
        """Copy the first `length` positions of another cache (prefix caching across chat turns)."""
        for mine, theirs in zip(self.keys + self.values, other.keys + other.values):
            mine[:, :, :length] = theirs[:, :, :length]
        self.length = length

    def key_norms(self) -> torch.Tensor:
        """L2 norm of every stored key vector, (layers, B, K, length): a small picture of the cache."""
        return torch.stack([k[:, :, : self.length].float().norm(dim=-1) for k in self.keys])

    def value_norms(self) -> torch.Tensor:
        return torch.stack([v[:, :, : self.length].float().norm(dim=-1) for v in self.values])
