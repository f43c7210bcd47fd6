"""Decode with static shapes, so one step can be captured as a CUDA graph and replayed.

Eager decode launches hundreds of small kernels per token; on a GPU the gaps between launches,
not the math, can dominate ("the gap between steps"). A graph needs every tensor shape and address
fixed, so the step uses the model's ordinary forward with a *static plan*: the positions are a
device tensor (written before each replay), attention reads the WHOLE preallocated cache and a mask,
computed from those positions inside the graph, hides what is not written yet. The same forward
serves eager decode; only the plan differs. On CPU the static step runs eagerly (for tests).
`graphed_steps(lm)` is what generate takes as `make_step` to replay every decode step from a graph.
Reference: PyTorch CUDA graphs (torch.cuda.CUDAGraph), gpt-fast's `input_pos`.
"""
from __future__ import annotations

import torch

from engine.core.kv_cache import KVCache, Plan
from engine.errors import EngineError


def check_cuda(lm) -> None:
    if lm.device.type != "cuda":
        raise EngineError("CUDA graphs need a CUDA GPU; this model runs on " + lm.device.type)


def static_plan(cache: KVCache, positions: torch.Tensor) -> Plan:
    """Plan for one token per row at `positions` (B, 1) (a device tensor), reading all max_len positions."""
    visible = torch.arange(cache.max_len, device=positions.device)[None, :] <= positions  # (B, S_max)
    return Plan(positions, cache.max_len, visible[:, None, None, :], advance=False)  # mask (B, 1, 1, S_max)


@torch.inference_mode()
def static_decode_step(lm, token: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """token (B, 1) at `positions` (B, 1) -> logits (B, V); fixed shapes, no host-side bookkeeping."""
    return lm.forward(token, cache, plan=static_plan(cache, positions))[0]


class GraphedDecoder:
    """Replays one captured decode step: write the tokens and positions into static buffers, replay.

    Use after a normal prefill into `cache`; call `step(token_ids)` once per new token.
    """

    def __init__(self, lm, cache: KVCache, warmup_steps: int = 3):
        check_cuda(lm)
        self.lm, self.cache = lm, cache
        self.token = torch.zeros(cache.batch, 1, dtype=torch.long, device=lm.device)  # static input (B, 1)
        self.positions = torch.zeros(cache.batch, 1, dtype=torch.long, device=lm.device)  # static input (B, 1)
        saved = [t.clone() for t in cache.keys + cache.values]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up on a side stream, as the CUDA-graph docs require
            for _ in range(warmup_steps):
                static_decode_step(lm, self.token, self.positions, cache)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = static_decode_step(lm, self.token, self.positions, cache)  # (B, V) static output
        for t, s in zip(cache.keys + cache.values, saved):  # undo the warm-up's writes
            t.copy_(s)

    def step(self, token_ids: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token_ids.view(-1, 1))
        self.positions.copy_(torch.from_numpy(self.cache.lengths).view(-1, 1))
        self.graph.replay()
        self.cache.advance(1)
        return self.logits


def graphed_step(lm, cache: KVCache):
    """A step-maker for generate: capture one decode step on `cache` (after the prefill), return its replay."""
    return GraphedDecoder(lm, cache).step


def graphed_steps(lm):
    """`make_step` for engine.generate that replays each decode step from a CUDA graph; refuses a non-CUDA
    model now, before any work, with a clear EngineError."""
    check_cuda(lm)
    return graphed_step
