"""A bfloat16 model's prompts run in float32, from a widened copy of its weights, where measured faster here.

On a CPU without bfloat16 arithmetic (AVX2) a bfloat16 prefill is slower than a float32 one: every op converts
element by element and every product pays the widening again. Here the whole prompt pass runs on a float32 copy of
the weights, made once (4 bytes per parameter), with the float32 kernels measured for prompts here (kernel_choice.py).
Its keys and values go into the model's bfloat16 KV cache (rounded as a bfloat16 pass stores them), so a decode step
after it sees the cache a bfloat16 prefill would have left; decode steps stay bfloat16 (half the bytes to stream).
Chosen by measurement like every fast path (fast_paths.py); where the CPU has bfloat16 matrix instructions (AVX-512
BF16, AMX) the bfloat16 pass is expected to win, and then no copy is kept (docs/decisions/bfloat16.md).
"""
from __future__ import annotations

import copy
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from engine.core.backends import Backends, run_pass
from engine.core.free_memory import available_memory_bytes
from engine.core.kv_cache import KVCache, Plan
from engine.techniques.fast_paths import Fit, take_turns
from engine.techniques.kernel_choice import PREFILL_ROWS, choose
from engine.techniques.matmul_kernels import MatmulKernels

HALF = (torch.bfloat16, torch.float16)
ROUNDS = 2  # timed rounds after one warm-up, the two passes taking turns (the best round counts)
TOLERANCE = 5e-2  # of the logits' scale: the bfloat16 pass rounds every activation, the float32 one none
EXACT = 1e-2  # ... and against float32 all through: only the cache's rounding differs (SmolLM2: 1.3-1.5e-3 measured)
VERSION = 3  # of the pass and its check: a changed one is measured again
MEMORY_SHARE = 0.5  # the copy is made only where it takes at most this share of the memory free now


class PromptPass:
    """The float32 copy's forward, for the half-precision model's wide passes (backends.run_pass hands them over).

    Not an nn.Module of the model: the copy's parameters are not the model's own (its weights, its kernels)."""

    def __init__(self, model32: nn.Module, backends32: Backends, copy_bytes: int):
        self.model32, self.backends32, self.copy_bytes = model32, backends32, copy_bytes

    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan, all_logits: bool) -> torch.Tensor:
        return run_pass(self.model32, self.backends32, ids, cache, plan=plan, all_logits=all_logits)[0]


def widened_copy(model: nn.Module) -> nn.Module:
    """A float32 copy of a model (tied weights stay tied), its rotary tables computed again in float32 rather than
    widened from the half-precision ones."""
    memo = {id(p): nn.Parameter(p.detach().float(), requires_grad=False) for p in model.parameters()}  # tied: once
    memo |= {id(b): b.float() if b.is_floating_point() else b.clone() for b in model.buffers()}
    model32 = copy.deepcopy(model, memo)  # new modules; each parameter widened once
    model32.reset_buffers()
    return model32.eval().requires_grad_(False)


def copy_bytes(model: nn.Module) -> int:
    """Bytes a float32 copy of the model's parameters takes (parameters() lists a tied matrix once)."""
    return 4 * sum(p.numel() for p in model.parameters())


def _prompt(cfg) -> torch.Tensor:
    """The PREFILL_ROWS-token prompt (or the model's whole context, if shorter) both passes are checked and timed on."""
    return torch.arange(min(PREFILL_ROWS, cfg.max_seq_len)).remainder(cfg.vocab_size)[None]  # (1, n)


class Float32Prompts:
    """The fast path (fast_paths.FastPath): a half-precision model's prompts through a float32 copy of its weights."""

    name = "prompts in float32 from a widened copy of the weights"
    fast, rival = "float32", "own dtype"

    def timed_at(self, lm) -> str:
        return f"for a {_prompt(lm.model.cfg).shape[1]}-token prompt"

    def fit(self, lm, backends: Backends) -> Fit:
        if lm.device.type != "cpu":
            return Fit.no("CPU only")
        if lm.dtype not in HALF:
            return Fit.no("bfloat16 and float16 models only")
        return Fit.yes()

    def key(self, lm) -> dict:
        return {"version": VERSION, "rows": PREFILL_ROWS}

    def build(self, lm, backends: Backends, folder: Path) -> PromptPass:
        need, free = copy_bytes(lm.model), available_memory_bytes("cpu")
        if free is not None and need > MEMORY_SHARE * free:
            raise MemoryError(f"a float32 copy of the weights needs {need / 1e9:.1f} GB and {free / 1e9:.1f} GB is free")
        model32 = widened_copy(lm.model)
        choice = choose(model32, torch.float32, folder)  # the float32 kernels measured for prompts here
        return PromptPass(model32, Backends(ops=MatmulKernels(model32, choice, decode="plain")), need)

    @torch.inference_mode()
    def check(self, lm, backends: Backends, passes: PromptPass) -> bool:
        """One prompt through both passes and through the copy with a float32 cache (the reference): logits within
        TOLERANCE of the half-precision pass's (the copy holds the model's weights), within EXACT of the reference's
        and its next token (the cache written and read back right), the cache within TOLERANCE of the reference's."""
        model = lm.model
        cfg, ids = model.cfg, _prompt(model.cfg)
        n = ids.shape[1]
        half_cache, cache = (KVCache(cfg, 1, n, lm.dtype, "cpu") for _ in range(2))
        ref_cache = KVCache(cfg, 1, n, torch.float32, "cpu")
        half = run_pass(model, backends, ids, half_cache)[0]  # (1, V)
        plan = cache.plan(n)
        got, ref = passes(ids, cache, plan, False), passes(ids, ref_cache, ref_cache.plan(n), False)
        pairs = [(got, half, TOLERANCE), (got, ref, EXACT),
                 *[(a, b, TOLERANCE) for a, b in zip(cache.keys + cache.values, ref_cache.keys + ref_cache.values)]]
        close = all(float((a.float() - b).abs().max()) <= tol * float(b.abs().max()) for a, b, tol in pairs)
        return close and got.argmax(-1).tolist() == ref.argmax(-1).tolist()

    @torch.inference_mode()
    def race(self, lm, backends: Backends, passes: PromptPass) -> tuple[float, float]:
        """(float32 ms, own dtype ms) for a PREFILL_ROWS-token prompt: best of ROUNDS rounds after a warm-up."""
        ids = _prompt(lm.model.cfg)
        cache = KVCache(lm.model.cfg, 1, ids.shape[1], lm.dtype, "cpu")

        def once(wide: bool) -> float:
            cache.reset()
            start = time.perf_counter()
            if wide:
                passes(ids, cache, cache.plan(ids.shape[1]), False)
            else:
                run_pass(lm.model, backends, ids, cache)
            return time.perf_counter() - start

        once(True)  # one untimed warm-up of each
        once(False)
        best = take_turns({"wide": lambda: once(True), "half": lambda: once(False)}, ROUNDS)
        return 1000 * best["wide"], 1000 * best["half"]

    def attach(self, backends: Backends, passes: PromptPass) -> Backends:
        return replace(backends, prompt_pass=passes)


FLOAT32_PROMPTS = Float32Prompts()
