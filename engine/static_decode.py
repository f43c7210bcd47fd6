"""Decode with static shapes, so one step can be captured as a CUDA graph and replayed.

Eager decode launches hundreds of small kernels per token; on a GPU the gaps between launches,
not the math, can dominate ("the gap between steps"). Here every tensor has a fixed shape: the new
token attends over the WHOLE preallocated cache with a mask hiding positions not yet written, and
the position is a device tensor. The same step then replays from a CUDA graph with one launch
(PyTorch CUDA graphs: torch.cuda.CUDAGraph). On CPU the static path runs eagerly (for tests).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.kv_cache import KVCache
from engine.layers import apply_rope


@torch.inference_mode()
def static_decode_step(lm, token: torch.Tensor, pos: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """token (B, 1) at position `pos` (0-dim long tensor) -> logits (B, V); cache.length is not used."""
    model, cfg = lm.model, lm.config
    B = token.shape[0]
    H, K, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    x = model.tok_emb(token)  # (B, 1, C)
    rope = None
    if model.pos_emb is not None:
        x = x + model.pos_emb(pos.view(1))  # (1, C) broadcast over B
    else:
        rope = (model.rope_cos.index_select(0, pos.view(1)), model.rope_sin.index_select(0, pos.view(1)))  # (1, D)
    visible = (torch.arange(cache.max_len, device=token.device) <= pos).view(1, -1)  # (1, S_max): written only
    for i, block in enumerate(model.blocks):
        attn = block.attn
        qkv = attn.qkv(block.attn_norm(x)).view(B, 1, H + 2 * K, D).transpose(1, 2)  # (B, H+2K, 1, D)
        qk, v = qkv[:, : H + K], qkv[:, H + K:]
        if rope is not None:
            qk = apply_rope(qk, *rope)
        q, k = qk[:, :H], qk[:, H:]  # (B, H, 1, D), (B, K, 1, D)
        cache.keys[i].index_copy_(2, pos.view(1), k)
        cache.values[i].index_copy_(2, pos.view(1), v)
        grouped = q.reshape(B, K, H // K, D)  # (B, K, H/K, D): query heads folded per KV head
        y = F.scaled_dot_product_attention(grouped, cache.keys[i], cache.values[i], attn_mask=visible)
        x = x + attn.out(y.reshape(B, 1, H * D))
        x = x + block.mlp(block.mlp_norm(x))
    return model.lm_head(model.final_norm(x[:, -1])).float()


class GraphedDecoder:
    """Replays one captured decode step: write the token and position into static buffers, replay.

    Use after a normal prefill into `cache`; call `step(token_ids)` once per new token.
    """

    def __init__(self, lm, cache: KVCache, warmup_steps: int = 3):
        if lm.device.type != "cuda":
            raise RuntimeError("CUDA graphs need a CUDA device")
        self.lm, self.cache = lm, cache
        self.token = torch.zeros(cache.batch, 1, dtype=torch.long, device=lm.device)  # static input
        self.pos = torch.zeros((), dtype=torch.long, device=lm.device)  # static input
        self.length = cache.length
        saved = [t.clone() for t in cache.keys + cache.values]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up on a side stream, as the CUDA-graph docs require
            for _ in range(warmup_steps):
                static_decode_step(lm, self.token, self.pos, cache)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = static_decode_step(lm, self.token, self.pos, cache)  # (B, V) static output
        for t, s in zip(cache.keys + cache.values, saved):  # undo the warm-up's writes
            t.copy_(s)

    def step(self, token_ids: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token_ids.view(-1, 1))
        self.pos.fill_(self.length)
        self.graph.replay()
        self.length += 1
        self.cache.length = self.length
        return self.logits
