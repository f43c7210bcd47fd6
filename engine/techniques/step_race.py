"""How a whole decode step (the C step, torch.compile's) is checked and timed against the step that runs without it.

Both decode-step paths use these: a cache holding a real prefix, two steps beside the rival (the model's backends
so far: the eager flat loop through the matmul kernels chosen here) giving the same tokens and logits close to
its, then STEPS steps at CONTEXT cached tokens, the two taking turns, best of ROUNDS rounds.
"""
from __future__ import annotations

import time
from dataclasses import replace

import torch

from engine.core.backends import Backends, run_pass
from engine.core.kv_cache import KVCache
from engine.techniques.fast_paths import Fit, take_turns

CONTEXT = 128  # the context the steps are timed at
CHECKED = 24  # the context a step is checked at (the same code for every length, without 128-token prefills)
STEPS, ROUNDS = 8, 3  # steps per timed round; rounds, the two taking turns (the best round counts)
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 5e-2}  # of the logits' scale; bfloat16's eager step rounds every
# activation to bfloat16 where a fused step keeps float32 until it stores


def context_fit(cfg) -> Fit:
    if cfg.max_seq_len < CONTEXT + STEPS + 1:
        return Fit.no(f"models of a context of at least {CONTEXT + STEPS + 1} tokens only (timed at {CONTEXT})")
    return Fit.yes()


def filled(model, backends: Backends, context: int, size: int, inference: bool = True) -> KVCache:
    """A one-row cache of `size` positions holding `context` tokens of a real prompt (attention over real keys)."""
    with torch.inference_mode(inference):  # a cache made outside inference mode is another kind of tensor
        cache = KVCache(model.cfg, 1, size, model.tok_emb.weight.dtype, "cpu")
    with torch.inference_mode():
        run_pass(model, backends, torch.arange(context).remainder(model.cfg.vocab_size)[None], cache)  # (1, context)
    return cache


@torch.inference_mode()
def same_steps(model, backends: Backends, step, inference: bool = True) -> bool:
    """Two steps of `step` beside two of the rival from the same prefix: the same tokens, the logits within
    TOLERANCE of their scale."""
    ids = torch.ones(1, 1, dtype=torch.long)
    ours, theirs = (filled(model, backends, CHECKED, CHECKED + 2, inference) for _ in range(2))
    tolerance = TOLERANCE.get(model.tok_emb.weight.dtype, 5e-2)
    for _ in range(2):
        want = run_pass(model, backends, ids, theirs)[0]  # (1, V)
        got = step(ids, ours, ours.plan(1))
        if got.argmax(-1).tolist() != want.argmax(-1).tolist():
            return False
        if float((got - want).abs().max()) > tolerance * float(want.abs().max()):
            return False
    return True


def _steps(run, cache: KVCache) -> float:
    """Seconds for STEPS decode steps from CONTEXT cached tokens (the cache's length put back afterwards)."""
    ids = torch.ones(1, 1, dtype=torch.long)
    start = time.perf_counter()
    for _ in range(STEPS):
        run(ids, cache, cache.plan(1)).argmax(-1).tolist()
    seconds = time.perf_counter() - start
    cache.lengths[:] = CONTEXT
    return seconds


@torch.inference_mode()
def race(model, backends: Backends, step) -> tuple[float, float]:
    """(step ms, rival ms) per decode step at CONTEXT, taking turns, best of ROUNDS."""
    cache = filled(model, backends, CONTEXT, CONTEXT + STEPS + 1)
    step(torch.ones(1, 1, dtype=torch.long), cache, cache.plan(1))  # warm
    cache.lengths[:] = CONTEXT

    def rival(ids, cache, plan):
        return run_pass(model, backends, ids, cache, plan=plan)[0]

    best = take_turns({"step": lambda: _steps(step, cache), "rival": lambda: _steps(rival, cache)}, ROUNDS)
    return 1000 * best["step"] / STEPS, 1000 * best["rival"] / STEPS


class DecodeStepPath:
    """What both decode-step fast paths share: timed per step at CONTEXT against the eager loop, attached as the step."""

    rival = "eager"

    def timed_at(self, lm) -> str:
        return f"per step at context {CONTEXT}"

    def race(self, lm, backends: Backends, step) -> tuple[float, float]:
        return race(lm.model, backends, step)

    def attach(self, backends: Backends, step) -> Backends:
        return replace(backends, decode_step=step)
