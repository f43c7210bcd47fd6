"""The small named pieces where GPT-2 and Llama differ, plus the two attention paths.

GPT-2: LayerNorm, learned positions, GELU MLP, multi-head attention.
Llama: RMSNorm, rotary positions (RoPE, Su et al. 2021), SwiGLU MLP (Shazeer 2020),
grouped-query attention (Ainslie et al. 2023). Shape letters: B batch, T new tokens,
S tokens in the cache (history + new), H query heads, K KV heads, D head dim, C model dim.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.core.backends import TORCH, TorchOps


class Linear(nn.Linear):
    """nn.Linear whose product runs through the pass's ops: torch's F.linear, or a matmul kernel measured faster here
    (engine/techniques/kernels.py). Called as a module, so hooks on it run."""

    def forward(self, x: torch.Tensor, ops: TorchOps = TORCH) -> torch.Tensor:
        return ops.linear(self, x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps), computed in float32 like the reference, then scaled by weight (RMSNorm's maths)."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)  # one fused kernel
    normed = F.rms_norm(x.float(), weight.shape, None, eps)
    return weight * normed.to(x.dtype)


def make_norm(arch: str, dim: int, eps: float) -> nn.Module:
    return nn.LayerNorm(dim, eps=eps) if arch == "gpt2" else RMSNorm(dim, eps)


def rope_tables(head_dim: int, max_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for every position, each (max_len, D), in the 'rotate half' layout HF uses."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)  # (S_max, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (S_max, D)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (B, heads, T, D) by its positions' angles; cos/sin are (T, D), or (B, 1, T, D) per sequence."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (B, heads, T, D)
    return x * cos + rotated * sin


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin (..., D) with its first half negated: what `rotate_rows` multiplies the swapped halves by."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)  # (..., D)


def rotate_rows(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """apply_rope's rotation with fewer kernels, for the decode hot loop: x (..., D) -> (..., D), the same bits.

    The halves are swapped by one flip of a (2, D/2) view (no slicing, negating and concatenating per layer);
    the sign moved into `signed_sin` (computed once per step) gives (-x2) * s == x2 * (-s) exactly. Not
    addcmul: its fused multiply-add rounds once where apply_rope rounds twice.
    """
    half = x.shape[-1] // 2
    swapped = x.unflatten(-1, (2, half)).flip(-2).flatten(-2)  # (..., D): [x2, x1]
    out = x * cos
    return out.add_(swapped * sin_signed)


class GeluMLP(nn.Module):
    """GPT-2: C -> 4C -> GELU(tanh) -> C."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc = Linear(dim, hidden)
        self.proj = Linear(hidden, dim)

    def forward(self, x: torch.Tensor, ops: TorchOps = TORCH) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x, ops), approximate="tanh"), ops)


class SwiGLUMLP(nn.Module):
    """Llama: gate and up projections fused into one matmul, SiLU(gate) * up, then down."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_up = Linear(dim, 2 * hidden, bias=False)
        self.down = Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor, ops: TorchOps = TORCH) -> torch.Tensor:
        gate_up = self.gate_up(x, ops)  # (B, T, 2F): both projections in one product
        return self.down(ops.silu_mul(gate_up), ops)  # SiLU(gate) * up (B, T, F), then down


def make_mlp(arch: str, dim: int, hidden: int) -> nn.Module:
    return GeluMLP(dim, hidden) if arch == "gpt2" else SwiGLUMLP(dim, hidden)


def causal_mask(n_new: int, n_total: int, device: torch.device) -> torch.Tensor:
    """(T, S) boolean: new token i (at position S-T+i) may see every position <= its own."""
    offset = n_total - n_new
    rows = torch.arange(n_new, device=device)[:, None] + offset
    cols = torch.arange(n_total, device=device)[None, :]
    return cols <= rows


def attention_fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Fused attention for timing. q (B, H, T, D); k, v (B, K, S, D) -> (B, H, T, D).

    mask: None for plain causal attention, else (B, 1, T, S) booleans (rows of different lengths).
    """
    B, H, T, D = q.shape
    K, S = k.shape[1], k.shape[2]
    if k.dtype != q.dtype:  # a float32 prompt pass over a bfloat16 cache (prompt_pass.py): read it widened
        k, v = k.to(q.dtype), v.to(q.dtype)
    if T == 1:  # decode: fold each KV head's query heads into the "token" axis, so KV is read once, never repeated
        grouped = q.view(B, K, H // K, D)  # (B, K, H/K, D)
        m = None if mask is None else mask.view(mask.shape[0], 1, 1, S)  # (B, 1, 1, S) broadcast over heads
        return F.scaled_dot_product_attention(grouped, k, v, attn_mask=m).view(B, H, 1, D)
    gqa = H != K
    if mask is None and T == S:  # prefill into an empty cache: plain causal
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    if mask is None:
        mask = causal_mask(T, S, q.device)  # prefill on top of a cached prefix
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


def attention_explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(D)) V written out, returning the probabilities too.

    q (B, H, T, D); k, v (B, K, S, D) -> out (B, H, T, D), probs (B, H, T, S). Scores and softmax are
    computed in float32 whatever the model dtype (float16 scores can overflow).
    """
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, H, S, D): each KV head serves `group` query heads
    v = v.repeat_interleave(group, dim=1)  # (B, H, S, D)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, S) in float32
    if mask is None:
        mask = causal_mask(q.shape[2], k.shape[2], q.device)  # (T, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)  # (B, H, T, S)
    return (probs @ v.float()).to(q.dtype), probs.to(q.dtype)
