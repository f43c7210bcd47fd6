"""One decoder-only Transformer for GPT-2 and Llama: embeddings, N identical blocks, final norm, LM head.

The eager reference forward: what engine/core/reference.py runs for both phases and what every fast path is
checked against. The same `forward` serves prefill (T = prompt length, one pass), decode (T = 1), rows of
different lengths in one decode step (continuous batching) and the fixed-shape step a CUDA graph replays: the KV
cache's `Plan` says at which positions the new tokens sit and which cached positions they may read (as
gpt-fast's `input_pos`). A `RaggedPlan` runs rows with different numbers of new tokens (prefill chunks beside
decode rows) as one flat batch: every linear layer and the MLP see all N tokens at once (that is where the steps
share compute), attention runs per row over its own cache row, as nano-vllm's flattened batches do.
`decode_rows` is a plain decode step (one token per row, rows at one position) as one flat loop without module
calls (gpt-fast's hot loop): the same maths and the same bits in less time. `ops` (engine/core/backends.py) is what
each layer's products and pointwise work run through: torch's ops here; the fast paths a loaded model chose at
load are picked per pass by `backends.run_pass`, never stored on the model. Compare nanoGPT's and gpt-fast's
model.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.core.backends import TORCH, TorchOps
from engine.core.config import ModelConfig
from engine.core.kv_cache import KVCache, Plan, RaggedPlan
from engine.core.layers import (
    Linear,
    apply_rope,
    attention_explicit,
    attention_fast,
    make_mlp,
    make_norm,
    rope_tables,
    rotate_rows,
    signed_sin,
)
from engine.errors import EngineError


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        H, K, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.qkv = Linear(cfg.d_model, (H + 2 * K) * D, bias=cfg.qkv_bias)  # fused Q, K, V
        self.out = Linear(H * D, cfg.d_model, bias=cfg.qkv_bias)

    def forward(self, x, layer: int, cache: KVCache, plan: Plan, rope: tuple | None, capture: bool,
                ops: TorchOps = TORCH):
        B, T, _ = x.shape
        H, K, D = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        qkv = self.qkv(x, ops)  # (B, T, (H+2K) D)
        if ops.fused_attention and not capture:  # RoPE, cache write and causal attention in one call (C)
            return self.out(ops.attention(qkv, rope, layer, cache, plan), ops), None  # (1, T, C)
        qkv = qkv.view(B, T, H + 2 * K, D).transpose(1, 2)  # (B, H+2K, T, D)
        qk, v = qkv[:, : H + K], qkv[:, H + K:]  # (B, H+K, T, D), (B, K, T, D)
        if rope is not None:
            qk = apply_rope(qk, *rope)  # queries and keys rotated together: one set of kernels
        q, k = qk[:, :H], qk[:, H:]  # (B, H, T, D), (B, K, T, D)
        if isinstance(plan, RaggedPlan):
            y = ragged_attention(q, k, v, layer, cache, plan)  # (1, H, N, D)
            return self.out(y.transpose(1, 2).reshape(B, T, H * D), ops), None  # (1, N, C)
        k_all, v_all = cache.write(layer, k, v, plan)  # (B, K, S, D): history + these T tokens
        if capture:
            y, probs = attention_explicit(q, k_all, v_all, plan.mask)  # probs (B, H, T, S)
        else:
            y, probs = attention_fast(q, k_all, v_all, plan.mask), None
        y = y.transpose(1, 2).reshape(B, T, H * D)  # (B, T, C)
        return self.out(y, ops), probs


def ragged_attention(q, k, v, layer: int, cache: KVCache, plan: RaggedPlan) -> torch.Tensor:
    """q (1, H, N, D), k, v (1, K, N, D) laid out row after row -> (1, H, N, D).

    Each row writes its tokens into its own cache row and attends over that row alone: a decode row reads its
    whole history, a chunk reads the earlier chunks (through the cache) and itself causally. Nothing is padded.
    """
    out, first = [], 0
    for row, start, n in zip(plan.rows, plan.starts, plan.counts):
        span = slice(first, first + n)
        k_all, v_all = cache.write_row(layer, row, start, k[:, :, span], v[:, :, span])  # (1, K, start+n, D)
        out.append(attention_fast(q[:, :, span], k_all, v_all))  # (1, H, n, D)
        first += n
    return torch.cat(out, dim=2)  # (1, H, N, D)


class Block(nn.Module):
    """Pre-norm block, identical in shape for both families: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = make_norm(cfg.arch, cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = make_norm(cfg.arch, cfg.d_model, cfg.norm_eps)
        self.mlp = make_mlp(cfg.arch, cfg.d_model, cfg.d_ff)

    def forward(self, x, layer, cache, plan, rope, capture, ops: TorchOps = TORCH):
        a, probs = self.attn(ops.norm(self.attn_norm, x), layer, cache, plan, rope, capture, ops)
        x, h = ops.add_norm(x, a, self.mlp_norm)  # x + a, and its norm for the MLP
        return x + self.mlp(h, ops), probs


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        # `_weight` skips the random init (the checkpoint overwrites it; on the meta device that init
        # would import torch's compiler stack, ~2 s)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model, _weight=torch.empty(cfg.vocab_size, cfg.d_model))
        self.pos_emb = (nn.Embedding(cfg.max_seq_len, cfg.d_model, _weight=torch.empty(cfg.max_seq_len, cfg.d_model))
                        if cfg.arch == "gpt2" else None)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.final_norm = make_norm(cfg.arch, cfg.d_model, cfg.norm_eps)
        self.lm_head = Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        if cfg.uses_rope:
            self.register_buffer("rope_cos", torch.empty(cfg.max_seq_len, cfg.head_dim), persistent=False)
            self.register_buffer("rope_sin", torch.empty(cfg.max_seq_len, cfg.head_dim), persistent=False)
            self.reset_buffers()

    def reset_buffers(self) -> None:
        """(Re)compute the rotary tables, e.g. after building the model on the meta device."""
        if self.cfg.uses_rope and self.rope_cos.device.type != "meta":
            cos, sin = rope_tables(self.cfg.head_dim, self.cfg.max_seq_len, self.cfg.rope_theta)
            self.rope_cos.copy_(cos)  # (S_max, D)
            self.rope_sin.copy_(sin)  # (S_max, D)

    def check_pass(self, ids: torch.Tensor, plan: Plan | RaggedPlan, capture_layers=(), on_probs=None) -> None:
        """A clear EngineError for a pass this model cannot run (before any path runs it)."""
        B, T = ids.shape
        if isinstance(plan, RaggedPlan) and (capture_layers or on_probs is not None or B != 1 or T != sum(plan.counts)):
            raise EngineError("a ragged pass takes ids (1, N) with N = its rows' token counts, and captures nothing")
        if plan.end > self.cfg.max_seq_len:
            raise EngineError(f"positions up to {plan.end} exceed the model's context of {self.cfg.max_seq_len} tokens")

    def forward(self, ids: torch.Tensor, cache: KVCache, *, plan: Plan | None = None, all_logits: bool = False,
                capture_layers: tuple[int, ...] = (), on_probs=None, last_layer: int | None = None,
                ops: TorchOps = TORCH) -> tuple[torch.Tensor | None, dict[int, torch.Tensor]]:
        """ids (B, T) placed by `plan` (default: right after each cache row's own length).

        Returns logits (B, V) for the last position, or (B, T, V) with all_logits, and the attention
        probabilities (B, H, T, S) of each layer in `capture_layers` (or, with `on_probs(layer, probs)`,
        hands each layer's over as soon as it exists and keeps none). With `last_layer`, stops after
        that block and returns no logits (a capture needs no more; the cache then holds only those layers).
        """
        B, T = ids.shape
        plan = plan if plan is not None else cache.plan(T)
        self.check_pass(ids, plan, capture_layers, on_probs)
        ragged = isinstance(plan, RaggedPlan)  # ids (1, N): rows' tokens end to end; logits (rows, V)
        x = self.tok_emb(ids)  # (B, T, C)
        rope = None
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[plan.positions]  # learned positions (T, C) or (B, T, C)
        else:
            cos, sin = self.rope_cos[plan.positions].to(x.dtype), self.rope_sin[plan.positions].to(x.dtype)
            rope = (cos, sin) if cos.dim() == 2 else (cos[:, None], sin[:, None])  # (T, D) or (B, 1, T, D)
        captured = {}
        for i, block in enumerate(self.blocks[: None if last_layer is None else last_layer + 1]):
            x, probs = block(x, i, cache, plan, rope, i in capture_layers, ops)
            if probs is not None and on_probs is not None:
                on_probs(i, probs)
            elif probs is not None:
                captured[i] = probs
        if plan.advance:
            cache.advance_ragged(plan) if ragged else cache.advance(T)
        if last_layer is not None:
            return None, captured
        if ragged:
            x = x[0, plan.last_tokens]  # (rows, C): each row's last token (all_logits: use a plain plan)
        elif not all_logits:
            x = x[:, -1]  # (B, C): generation only needs the next-token distribution
        return self.lm_head(self.final_norm(x), ops).float(), captured

    def rope_row(self, pos: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """One position's RoPE for `rotate_rows`: cos (D,), and sin (D,) with its first half negated."""
        return self.rope_cos[pos].to(dtype), signed_sin(self.rope_sin[pos].to(dtype))

    def decode_rows(self, ids: torch.Tensor, cache: KVCache, plan: Plan, ops: TorchOps = TORCH) -> torch.Tensor:
        """A decode step (Llama family), ids (B, 1) at one shared position -> logits (B, V): the blocks' forward
        as one flat loop over each layer's weights, as gpt-fast's hot loop. Every tensor stays (B, features):
        no (B, heads, T, D) transposes, no module calls, RoPE as one flip and the cache write as one copy per
        tensor. Same ops in the same order as `forward` through the blocks, so the same bits (a test checks)."""
        keys, values, pos, S = cache.keys, cache.values, plan.positions.start, plan.read_len  # write at pos, read [0, S)
        B = ids.shape[0]
        H, K, D = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        x = F.embedding(ids[:, 0], self.tok_emb.weight)  # (B, C)
        cos, sin = self.rope_row(pos, x.dtype)  # (D,) each
        for layer, block in enumerate(self.blocks):
            attn, mlp = block.attn, block.mlp
            qkv = attn.qkv.forward(block.attn_norm.forward(x), ops).view(B, H + 2 * K, D)  # (B, H+2K, D)
            qk = rotate_rows(qkv[:, : H + K], cos, sin)  # (B, H+K, D)
            k_all, v_all = keys[layer], values[layer]  # (B, K, S_max, D)
            k_all[:, :, pos].copy_(qk[:, H:])  # (B, K, D) into position pos
            v_all[:, :, pos].copy_(qkv[:, H + K:])  # (B, K, D)
            q = qk[:, :H].view(B, K, H // K, D)  # (B, K, H/K, D): each KV head's queries as its "tokens"
            y = F.scaled_dot_product_attention(q, k_all[:, :, :S], v_all[:, :, :S])  # (B, K, H/K, D)
            x = x + attn.out.forward(y.reshape(B, H * D), ops)  # (B, C)
            gate, up = mlp.gate_up.forward(block.mlp_norm.forward(x), ops).chunk(2, dim=-1)  # (B, F) each
            x = x + mlp.down.forward(F.silu(gate) * up, ops)  # (B, C)
        if plan.advance:
            cache.advance(1)
        return self.lm_head.forward(self.final_norm(x), ops).float()

