"""The KV cache: an explicit, preallocated store of every past token's keys and values per layer.

Decode reads all of it on every step, which is why decode is bound by memory traffic. The cache is
an object the caller owns and passes in, never hidden in modules (gpt-fast and nano-vllm keep theirs
as buffers inside each attention module; here a student can hold it, measure it and reset it).
Each sequence (row) has its own length, so sequences of different lengths can share one decode
step (continuous batching); `plan` says where the next tokens go and what attention may read, and
`plan_ragged` lets rows take different numbers of new tokens in one pass (chunked prefill beside decode rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.core.config import ModelConfig
from engine.errors import EngineError


@dataclass
class Plan:
    """Where one forward pass writes its T new tokens per sequence, and which cache positions it reads.

    positions: a slice (every sequence at the same positions: the common case) or a LongTensor (B, T).
    read_len: attention reads cache positions [0, read_len).
    mask: None (plain causal) or a bool tensor (B, 1, T, read_len) of the positions each token may see.
    advance: move the host-side lengths after the pass (False for a captured CUDA graph, which
    replays without Python).
    """
    positions: slice | torch.Tensor
    read_len: int
    mask: torch.Tensor | None = None
    advance: bool = True

    @property
    def end(self) -> int:
        """One past the highest position written (a host int; the cache size for tensor positions)."""
        return self.positions.stop if isinstance(self.positions, slice) else self.read_len


@dataclass
class RaggedPlan:
    """One pass where rows take different numbers of new tokens, laid end to end in one flat batch (1, N).

    rows[i] takes counts[i] tokens at positions starts[i] .. starts[i] + counts[i] - 1: 1 for a decode row,
    a prompt chunk's length for a row being prefilled (Sarathi-Serve; vLLM's chunked prefill). Rows that take
    nothing this pass are not listed. Attention runs per listed row over its own cache row, causal within it.
    """
    rows: list[int]
    counts: list[int]
    starts: list[int]
    positions: torch.Tensor  # (N,) every token's position in its own row
    advance: bool = True

    @property
    def end(self) -> int:
        """One past the highest position written."""
        return max(s + n for s, n in zip(self.starts, self.counts))

    @property
    def last_tokens(self) -> list[int]:
        """Index in the flat batch of each listed row's last token (where its next-token logits come from)."""
        return list(np.cumsum(self.counts) - 1)


class KVCache:
    """Keys and values for `n_layers` layers, each (B, K, max_len, D); row b is filled up to lengths[b]."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, dtype: torch.dtype,
                 device: torch.device | str = "cpu", *, _tensors=None, _lengths=None):
        self.cfg = cfg
        self.batch = batch
        self.max_len = max_len
        self.dtype = dtype
        if _tensors is None:
            shape = (batch, cfg.n_kv_heads, max_len, cfg.head_dim)  # (B, K, S_max, D)
            # zeros, not empty: masked-off positions are still multiplied by 0 in attention, and 0 * NaN = NaN
            _tensors = ([torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)],
                        [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)])
        self.keys, self.values = _tensors
        # host-side tokens stored per row; a numpy array so that a view of some rows shares it (see `rows`)
        self.lengths = np.zeros(batch, dtype=np.int64) if _lengths is None else _lengths

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def length(self) -> int:
        """Tokens stored: the same for every row in plain generation (the longest row otherwise)."""
        return int(self.lengths.max()) if self.batch else 0

    @property
    def uniform(self) -> bool:
        return self.batch == 0 or int(self.lengths.min()) == int(self.lengths.max())

    @property
    def bytes_per_token(self) -> int:
        """Bytes one more token costs in ONE sequence: 2 x layers x K x D x dtype bytes (as Trace's field)."""
        return self.cfg.kv_bytes_per_token(self.dtype.itemsize)

    @property
    def nbytes_used(self) -> int:
        """Bytes holding real tokens, summed over every sequence."""
        return int(self.lengths.sum()) * self.bytes_per_token

    @property
    def nbytes_allocated(self) -> int:
        return self.batch * self.max_len * self.bytes_per_token

    # --- where the next tokens go ------------------------------------------------------------------------
    def plan(self, n_new: int) -> Plan:
        """The eager plan for n_new tokens per row after each row's own length."""
        end = int(self.lengths.max()) + n_new
        if end > self.max_len:
            raise EngineError(f"the KV cache holds {self.max_len} positions; writing up to {end} does not fit")
        if self.uniform:
            start = end - n_new
            return Plan(slice(start, end), end)
        if n_new != 1:
            raise EngineError("rows of different lengths can only take one token each (a decode step)")
        device = self.keys[0].device
        lengths = torch.from_numpy(self.lengths).to(device)  # (B,)
        visible = torch.arange(end, device=device)[None, :] <= lengths[:, None]  # (B, S): own tokens + the new one
        return Plan(lengths[:, None], end, visible[:, None, None, :])

    def plan_ragged(self, counts: list[int]) -> RaggedPlan:
        """The plan for counts[b] new tokens in row b, each after the row's own length (0: the row sits out)."""
        if len(counts) != self.batch:
            raise EngineError(f"a ragged pass needs one token count per cache row ({self.batch}), got {len(counts)}")
        rows = [b for b, n in enumerate(counts) if n > 0]
        if not rows:
            raise EngineError("a ragged pass needs at least one new token")
        starts = [int(self.lengths[b]) for b in rows]
        kept = [counts[b] for b in rows]
        end = max(s + n for s, n in zip(starts, kept))
        if end > self.max_len:
            raise EngineError(f"the KV cache holds {self.max_len} positions; writing up to {end} does not fit")
        positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, kept)])  # (N,)
        return RaggedPlan(rows, kept, starts, positions.to(self.keys[0].device))

    def write_row(self, layer: int, row: int, start: int, k: torch.Tensor, v: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store one row's k, v (1, K, T, D) at positions start.. start+T-1; return that row's views (1, K, S, D)
        over every position it may read, [0, start + T)."""
        end = start + k.shape[2]
        self.keys[layer][row, :, start:end] = k[0]  # (K, T, D)
        self.values[layer][row, :, start:end] = v[0]
        return self.keys[layer][row:row + 1, :, :end], self.values[layer][row:row + 1, :, :end]  # (1, K, S, D)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, plan: Plan) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, K, T, D) at the plan's positions; return views over [0, read_len) of that layer.

        `lengths` moves only in `advance`, once every layer has written.
        """
        keys, values = self.keys[layer], self.values[layer]
        if isinstance(plan.positions, slice):
            keys[:, :, plan.positions] = k
            values[:, :, plan.positions] = v
        else:  # one token per row at its own position (T = 1)
            rows = torch.arange(k.shape[0], device=k.device)  # (B,)
            pos = plan.positions[:, 0]  # (B,)
            keys[rows, :, pos] = k[:, :, 0]  # (B, K, D) written at (b, :, pos[b])
            values[rows, :, pos] = v[:, :, 0]
        return keys[:, :, : plan.read_len], values[:, :, : plan.read_len]  # (B, K, S, D) each

    def advance(self, n_tokens: int) -> None:
        self.lengths += n_tokens

    def advance_ragged(self, plan: RaggedPlan) -> None:
        self.lengths[plan.rows] += plan.counts

    # --- housekeeping ------------------------------------------------------------------------------------
    def truncate(self, length: int) -> None:
        """Forget everything after `length` in every row (rejected speculative tokens, a shared chat prefix)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        np.minimum(self.lengths, length, out=self.lengths)

    def reset(self) -> None:
        self.lengths[:] = 0

    def rows(self, start: int, stop: int) -> KVCache:
        """A cache over rows [start, stop) sharing this one's storage and lengths (no copy)."""
        tensors = ([k[start:stop] for k in self.keys], [v[start:stop] for v in self.values])
        return KVCache(self.cfg, stop - start, self.max_len, self.dtype, _tensors=tensors,
                       _lengths=self.lengths[start:stop])

    def move_row(self, src: int, dst: int) -> None:
        """Copy row `src` (its filled part) into row `dst`: keeps active sequences in rows 0..n-1."""
        n = int(self.lengths[src])
        for t in self.keys + self.values:
            t[dst, :, :n] = t[src, :, :n]
        self.lengths[dst] = n
        self.lengths[src] = 0

    def copy_prefix_from(self, other: KVCache, length: int) -> None:
        """Copy the first `length` positions of another cache (prefix caching across chat turns)."""
        if not 0 <= length <= other.length or length > self.max_len or other.batch != self.batch:
            raise ValueError(f"cannot copy {length} positions from a cache of {other.length} "
                             f"(batch {other.batch}) into one of {self.max_len} (batch {self.batch})")
        for mine, theirs in zip(self.keys + self.values, other.keys + other.values):
            mine[:, :, :length] = theirs[:, :, :length]
        self.lengths[:] = length

    def key_norms(self, row: int = 0) -> torch.Tensor:
        """L2 norm of every stored key vector of one row, (layers, K, length): a small picture of the cache."""
        n = int(self.lengths[row])
        return torch.stack([k[row, :, :n].float().norm(dim=-1) for k in self.keys])

    def value_norms(self, row: int = 0) -> torch.Tensor:
        n = int(self.lengths[row])
        return torch.stack([v[row, :, :n].float().norm(dim=-1) for v in self.values])
