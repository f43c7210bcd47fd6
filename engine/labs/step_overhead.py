"""The gap between decode steps, measured: how much of a step is overhead (a same-depth skeleton), and CUDA graphs.

A decode step's time is its math plus a fixed cost per step (Python, operator dispatch, kernel launches). A
skeleton with the real model's layers and operators but tiny matrices times that fixed cost alone; replaying the
step from one captured CUDA graph (engine/techniques/cuda_graphs.py) is the remedy that removes most of it. The
bridge's remedy, measured beside the others of engine/labs/remedies.py (same rows, same progress and cancel rules).
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

import torch

import engine
from engine.core.backends import EAGER
from engine.core.generate import decode_loop, new_cache, prefill
from engine.core.prompting import encode_prompt
from engine.labs.remedies import PhaseRow, Progress, _tick
from engine.techniques.cuda_graphs import graphed_steps
from engine.techniques.kernels import without_decode_step


@dataclass
class OverheadResult:
    real_step_s: float  # median decode step of the real model
    skeleton_step_s: float  # median decode step of a same-depth model whose matrices are tiny
    n_layers: int
    method: str

    @property
    def overhead_share(self) -> float:
        return self.skeleton_step_s / self.real_step_s if self.real_step_s > 0 else float("nan")


def skeleton_of(lm):
    """Same layers, heads and operator sequence as `lm`, but every matrix shrunk: its math costs ~nothing."""
    from engine.core.model import Transformer

    cfg = dataclasses.replace(lm.config, d_model=2 * lm.config.n_heads, head_dim=2, d_ff=8, vocab_size=256)
    model = Transformer(cfg)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # every weight set, deterministically: no uninitialised memory (NaNs) in what is timed
        for p in model.parameters():
            p.normal_(0.0, 0.02, generator=gen)
    model.reset_buffers()
    model = model.to(device=lm.device, dtype=lm.dtype).eval().requires_grad_(False)
    return dataclasses.replace(lm, model=model, config=cfg, name=f"{lm.name} skeleton", backends=EAGER)


@torch.inference_mode()
def median_decode_step(lm, context: int, steps: int) -> float:
    ids = torch.arange(context, device=lm.device).reshape(1, context) % 256  # (1, T)
    cache = new_cache(lm, 1, context + steps + 2)
    token = prefill(lm, ids, cache).argmax(-1)  # (1,)
    times = decode_loop(lm, token, cache, steps + 1)[1:]  # the first step is an untimed warm-up
    return statistics.median(times)


def measure_overhead(lm, context: int = 64, steps: int = 16, progress: Progress | None = None) -> OverheadResult:
    lm = without_decode_step(lm)  # eager steps, as the skeleton's: the same operators on both sides
    _tick(progress, "timing decode steps of the real model", 0.1)
    real = median_decode_step(lm, context, steps)
    _tick(progress, "timing decode steps of the same-depth skeleton", 0.6)
    skeleton = median_decode_step(skeleton_of(lm), context, steps)
    method = (f"Median of {steps} decode steps at context {context}. The skeleton has the same {lm.config.n_layers} layers and "
              f"the same operators in the same order, but {2 * lm.config.n_heads}-wide matrices, so its step time is almost "
              "pure per-step overhead (Python, operator dispatch, launches); real step − skeleton step ≈ the math.")
    return OverheadResult(real, skeleton, lm.config.n_layers, method)


@dataclass
class CudaGraphResult:
    eager: PhaseRow  # the same greedy request, decode steps launched op by op
    graphed: PhaseRow  # decode steps replayed from one captured CUDA graph
    same_tokens: bool


def measure_cuda_graphs(lm, prompt: str, n_tokens: int = 32, chat: bool = True,
                        progress: Progress | None = None) -> CudaGraphResult:
    """Eager decode vs CUDA-graph replay (engine/techniques/cuda_graphs.py) on the same request: the gap between steps."""
    make_step = graphed_steps(lm)  # refuses a model that is not on a CUDA GPU, before any work
    ids = encode_prompt(lm, prompt, chat)
    _tick(progress, "eager decode", 0.1)
    eager = engine.generate(lm, ids, n_tokens, ignore_eos=True)
    _tick(progress, "decode replayed from a CUDA graph", 0.55)
    graphed = engine.generate(lm, ids, n_tokens, ignore_eos=True, make_step=make_step)
    return CudaGraphResult(PhaseRow.from_traces("eager", [eager]), PhaseRow.from_traces("CUDA graph", [graphed]),
                           eager.output_ids == graphed.output_ids)
