"""Work and traffic per phase, the ONE place they are computed: FLOPs and bytes of prefill and decode.

Matmul FLOPs = 2 x multiply-adds (Kaplan et al. 2020, sec. 2.1: 2 FLOPs per weight per token).
Causal attention: token i (0-based) scores i+1 keys, so a prompt of T tokens scores T(T+1)/2 pairs
per head; QK^T and A.V each cost 2 x D FLOPs per pair. Prefill computes the LM head for the last
position only. A decode step multiplies one token per sequence through every weight and attends over
its whole cache; it must read every weight once plus every sequence's KV cache (Pope et al. 2022,
"Efficiently Scaling Transformer Inference").
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import ModelConfig

PREFILL_FORMULA = ("FLOPs = B × [2·W·T + 2·2·L·H·D·T(T+1)/2 + 2·V·C]   (W = weights in the blocks' matrices, "
                   "T(T+1)/2 = causal query–key pairs, LM head on the last token only)")


@dataclass(frozen=True)
class PrefillFlops:
    matmul: float  # 2 x W x T x B: every token through every block matrix
    attention: float  # QK^T and A.V over the causal triangle
    lm_head: float  # the last position's logits (every position's with all_logits)

    @property
    def total(self) -> float:
        return self.matmul + self.attention + self.lm_head


def prefill_flops(cfg: ModelConfig, tokens: int, batch: int = 1, last_logits_only: bool = True) -> PrefillFlops:
    """FLOPs of one prefill pass over `tokens` prompt tokens per sequence, for `batch` sequences."""
    T = tokens
    matmul = 2.0 * cfg.matmul_params * T
    attention = 2.0 * 2.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * T * (T + 1) / 2
    head = 2.0 * cfg.lm_head_params * (1 if last_logits_only else T)
    return PrefillFlops(batch * matmul, batch * attention, batch * head)


def decode_step_flops(cfg: ModelConfig, kv_len: int, batch: int = 1) -> float:
    """FLOPs of one decode step whose new token attends over `kv_len` cached tokens (itself included)."""
    dense = 2.0 * cfg.matmul_params + 2.0 * cfg.lm_head_params
    attention = 2.0 * 2.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * kv_len
    return batch * (dense + attention)


def decode_step_bytes(cfg: ModelConfig, kv_len: int, batch: int = 1, bytes_per_weight: float = 4,
                      kv_dtype_bytes: int = 4) -> float:
    """Bytes one decode step must read: all weights once (shared by the batch) + each sequence's KV cache."""
    return cfg.weight_bytes(bytes_per_weight) + batch * kv_len * cfg.kv_bytes_per_token(kv_dtype_bytes)


def prefill_bytes(cfg: ModelConfig, tokens: int, batch: int = 1, bytes_per_weight: float = 4,
                  kv_dtype_bytes: int = 4) -> float:
    """Weights read once + the KV cache written once (activations assumed to stay in cache: a lower bound)."""
    return cfg.weight_bytes(bytes_per_weight) + batch * tokens * cfg.kv_bytes_per_token(kv_dtype_bytes)
