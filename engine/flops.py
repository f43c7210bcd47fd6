"""Back-of-envelope work and traffic per phase: FLOPs for prefill, bytes for decode.

Matmul FLOPs = 2 x multiply-adds. Causal attention scores and weighted sums cost
2 x 2 x T^2/2 x H x D per layer for a prompt of T tokens. A decode step reads every weight once
plus the whole KV cache (Kaplan et al. 2020, sec. 2.1; Pope et al. 2022 "Efficiently Scaling
Transformer Inference").
"""
from __future__ import annotations

from engine.config import ModelConfig


def matmul_params(cfg: ModelConfig) -> int:
    """Parameters used in a matmul for every token (embedding lookups and positions excluded)."""
    C, F, D = cfg.d_model, cfg.d_ff, cfg.head_dim
    attn = C * (cfg.n_heads * D) + 2 * C * (cfg.n_kv_heads * D) + (cfg.n_heads * D) * C
    mlp = (3 if cfg.arch == "llama" else 2) * C * F
    return cfg.n_layers * (attn + mlp)


def prefill_flops(cfg: ModelConfig, tokens: int, batch: int = 1, last_logits_only: bool = True) -> float:
    """FLOPs of one prefill pass over `tokens` prompt tokens per sequence."""
    dense = 2 * matmul_params(cfg) * tokens
    attention = 2 * 2 * cfg.n_layers * cfg.n_heads * cfg.head_dim * tokens * (tokens + 1) / 2
    head = 2 * cfg.d_model * cfg.vocab_size * (1 if last_logits_only else tokens)
    return batch * (dense + attention + head)


def decode_step_flops(cfg: ModelConfig, context: int, batch: int = 1) -> float:
    """FLOPs of one decode step with `context` tokens already cached."""
    dense = 2 * matmul_params(cfg) + 2 * cfg.d_model * cfg.vocab_size
    attention = 2 * 2 * cfg.n_layers * cfg.n_heads * cfg.head_dim * (context + 1)
    return batch * (dense + attention)


def decode_step_bytes(weight_bytes: int, cfg: ModelConfig, context: int, dtype_bytes: int, batch: int = 1) -> int:
    """Bytes one decode step must read: all weights once, plus every sequence's KV cache."""
    return weight_bytes + batch * context * cfg.kv_bytes_per_token(dtype_bytes)
