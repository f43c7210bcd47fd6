"""A bfloat16 model's prompts run in float32, from a widened copy of its weights, where measured faster here.

On a CPU without bfloat16 arithmetic (AVX2), a bfloat16 prefill is slower than a float32 one: the matrix products
can widen their weights per call (kernel_candidates' `widened`), but attention, the norms, RoPE and the MLP's
activation still run on bfloat16 tensors, converted element by element, and every product pays the widening
again. Here the whole prompt pass runs on a float32 copy of the weights, made once (4 bytes per parameter:
538 MB for SmolLM2-135M), with the float32 kernels measured for prompts on this machine (kernel_choice.py). Its
keys and values go into the model's bfloat16 KV cache (rounded as a bfloat16 pass stores them) and attention reads
them back widened, so a decode step after it sees the cache a bfloat16 prefill would have left. Decode steps stay
bfloat16: half the bytes to stream is the point of choosing it. Issue 19 §2 allows this ("prefill in float32 from
bf16 weights"), and the sidebar says when it runs.

Chosen by measurement like the kernels and the decode step: at first load both passes run a PREFILL_ROWS-token
prompt, checked (`check`: logits close to the bfloat16 pass's and to a float32-cache reference's, the reference's
next token, the cache close to the reference's) and timed taking turns; the
float32 pass is kept only if more than MARGIN faster, the verdict cached beside the decode step's. Where the CPU
has bfloat16 matrix instructions (AVX-512 BF16, AMX) the bfloat16 pass is expected to win (a Xeon's oneDNN measured
909 GFLOP/s in bfloat16 vs 219-236 in float32; the pass itself not yet measured there), and then no copy is kept.
"""
from __future__ import annotations

import copy
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from engine.core.free_memory import available_memory_bytes
from engine.core.kv_cache import KVCache
from engine.techniques.compiled_decode import _cached, _save
from engine.techniques.kernel_choice import (
    MARGIN,
    PREFILL_ROWS,
    _key_id,
    _read,
    cache_key,
    default_cache_dir,
    switched_off,
)

SWITCH = "TWO_BENDS_PROMPT_PASS"  # "off": never widen (a user's escape hatch)
CACHE_FILE = "compiled-decode.json"  # beside the decode steps' verdicts, told apart by their key's "what"
HALF = (torch.bfloat16, torch.float16)
ROUNDS = 2  # timed rounds after one warm-up, the two passes taking turns (the best round counts)
TOLERANCE = 5e-2  # of the logits' scale: the bfloat16 pass rounds every activation, the float32 one none
EXACT = 1e-2  # ... and against float32 all through: only the cache's rounding differs (SmolLM2: 1.3-1.5e-3 measured)
VERSION = 2  # of the pass and its check: a changed one is measured again
MEMORY_SHARE = 0.5  # the copy is made only where it takes at most this share of the memory free now


@dataclass
class Verdict:
    use: bool  # True: the float32 pass is faster here and agrees with the bfloat16 one
    half_ms: float  # the model's own prompt pass, PREFILL_ROWS tokens
    wide_ms: float  # the float32 pass from the widened copy
    copy_mb: float  # the copy's size
    half: str = "bfloat16"  # the model's dtype
    cached: bool = False
    note: str = ""  # why not used, when it could not be

    def words(self) -> str:
        if self.note:
            return f"prompts in {self.half}, not float32: {self.note}"
        where = "cached verdict" if self.cached else "measured now"
        timing = f"float32 {self.wide_ms:.0f} ms vs {self.half} {self.half_ms:.0f} ms for {PREFILL_ROWS} tokens; {where}"
        if self.use:
            return f"prompts in float32 from a widened copy of the weights ({self.copy_mb:.0f} MB more; {timing})"
        return f"prompts in {self.half} ({timing})"


def applicable(dtype: torch.dtype, device: torch.device) -> str:
    """'' when a float32 prompt pass may serve a model of this dtype here, else why not."""
    if off := switched_off(SWITCH):
        return off
    if device.type != "cpu":
        return "CPU only"
    if dtype not in HALF:
        return "bfloat16 and float16 models only"
    return ""


class PromptPass:
    """The float32 twin's forward, for the half-precision model's wide passes (Transformer.forward hands them over).

    Not an nn.Module: the twin's parameters must not count as the model's own (its weights, its kernels)."""

    def __init__(self, model32: nn.Module, copy_bytes: int):
        self.model32 = model32
        self.copy_bytes = copy_bytes

    def __call__(self, ids: torch.Tensor, cache: KVCache, **kwargs):
        return self.model32(ids, cache, **kwargs)


def widened_copy(plain: nn.Module) -> nn.Module:
    """A float32 copy of a model with nn.Linear layers (tied weights stay tied), its rotary tables computed again in
    float32 rather than widened from the half-precision ones."""
    memo = {id(p): nn.Parameter(p.detach().float(), requires_grad=False) for p in plain.parameters()}  # tied: once
    memo |= {id(b): b.float() if b.is_floating_point() else b.clone() for b in plain.buffers()}
    compiled, passes = plain.compiled_decode, plain.prompt_pass
    plain.compiled_decode = plain.prompt_pass = None
    try:
        model32 = copy.deepcopy(plain, memo)  # new modules; each parameter widened once
    finally:
        plain.compiled_decode, plain.prompt_pass = compiled, passes
    model32.reset_buffers()
    return model32.eval().requires_grad_(False)


def copy_bytes(model: nn.Module) -> int:
    """Bytes a float32 copy of the model's parameters takes (parameters() lists a tied matrix once)."""
    return 4 * sum(p.numel() for p in model.parameters())


def _prompt(cfg) -> torch.Tensor:
    """The PREFILL_ROWS-token prompt (or the model's whole context, if shorter) both passes are checked and timed on."""
    return torch.arange(min(PREFILL_ROWS, cfg.max_seq_len)).remainder(cfg.vocab_size)[None]  # (1, n)


@contextmanager
def _own_pass(model):
    """`model` running its own wide passes for a while (its prompt_pass put back afterwards)."""
    saved, model.prompt_pass = model.prompt_pass, None
    try:
        yield model
    finally:
        model.prompt_pass = saved


@torch.inference_mode()
def check(model, passes: PromptPass) -> bool:
    """One prompt through both passes and through the copy with a float32 cache (the reference): logits within
    TOLERANCE of the half-precision pass's (the copy holds the model's weights), within EXACT of the reference's and
    its next token (the cache written and read back right), the cache within TOLERANCE of the reference's."""
    cfg, ids = model.cfg, _prompt(model.cfg)
    n = ids.shape[1]
    half_cache, cache = (KVCache(cfg, 1, n, model.tok_emb.weight.dtype, "cpu") for _ in range(2))
    ref_cache = KVCache(cfg, 1, n, torch.float32, "cpu")
    with _own_pass(model):
        half = model(ids, half_cache)[0]  # (1, V)
    got, ref = passes(ids, cache)[0], passes(ids, ref_cache)[0]
    pairs = [(got, half, TOLERANCE), (got, ref, EXACT), *[(a, b, TOLERANCE) for a, b in
                                                          zip(cache.keys + cache.values, ref_cache.keys + ref_cache.values)]]
    close = all(float((a.float() - b).abs().max()) <= tol * float(b.abs().max()) for a, b, tol in pairs)
    return close and got.argmax(-1).tolist() == ref.argmax(-1).tolist()


@torch.inference_mode()
def race(model, passes: PromptPass) -> tuple[float, float]:
    """(bfloat16 ms, float32 ms) for a PREFILL_ROWS-token prompt: best of ROUNDS rounds after a warm-up, taking turns."""
    ids = _prompt(model.cfg)
    cache = KVCache(model.cfg, 1, ids.shape[1], model.tok_emb.weight.dtype, "cpu")

    def once(run) -> float:
        cache.reset()
        start = time.perf_counter()
        run(ids, cache)
        return time.perf_counter() - start

    best = {"half": math.inf, "wide": math.inf}
    with _own_pass(model):
        for r in range(ROUNDS + 1):  # round 0 warms both up
            for name in (("half", "wide") if r % 2 else ("wide", "half")):
                seconds = once(model if name == "half" else passes)
                best[name] = min(best[name], seconds) if r else best[name]
    return 1000 * best["half"], 1000 * best["wide"]


def attach(model, plain: nn.Module, dtype: torch.dtype, kernels32, cache_dir: Path | None = None,
           remeasure: bool = False) -> Verdict:
    """Give the half-precision `model` a float32 prompt pass where one was measured faster here (call where
    `applicable`). `plain` is the model with nn.Linear layers to widen; kernels32(model32) swaps in the float32
    kernels measured for prompts. A cached verdict that the pass lost makes no copy."""
    folder = cache_dir or default_cache_dir()
    path, key = folder / CACHE_FILE, verdict_key(plain, dtype)
    found = None if remeasure else _cached(_read(path)[0].get(_key_id(key)), key, Verdict)
    if found is not None and not found.use:
        return found
    half = str(dtype).removeprefix("torch.")
    need, free = copy_bytes(plain), available_memory_bytes("cpu")
    if free is not None and need > MEMORY_SHARE * free:  # not cached: memory may be free at the next load
        return Verdict(False, 0.0, 0.0, need / 1e6, half, note=f"a float32 copy of the weights needs {need / 1e9:.1f} GB "
                                                              f"and {free / 1e9:.1f} GB is free")
    try:
        model32 = widened_copy(plain)
        passes = PromptPass(kernels32(model32), need)
    except (RuntimeError, MemoryError) as exc:  # no room for the copy: the model's own prompts, the reason said
        return Verdict(False, 0.0, 0.0, 0.0, half, note=f"could not widen the weights ({type(exc).__name__}: {str(exc)[:120]})")
    mb = passes.copy_bytes / 1e6
    if found is not None:  # won here before: no timing
        model.prompt_pass = passes
        return found
    if not check(model, passes):
        verdict = Verdict(False, 0.0, 0.0, mb, half, note=f"its logits differed from the {half} pass's")
    else:
        half_ms, wide_ms = race(model, passes)
        verdict = Verdict(wide_ms < half_ms * (1 - MARGIN), half_ms, wide_ms, mb, half)
    _save(path, key, verdict)
    if verdict.use:
        model.prompt_pass = passes
    return verdict


def verdict_key(plain: nn.Module, dtype: torch.dtype) -> dict:
    """This CPU, torch, threads and dtype (the kernel choice's key, with the nn.Linear model's shapes), this pass's
    version."""
    return cache_key(plain, dtype) | {"what": "float32 prompt pass", "version": VERSION, "rows": PREFILL_ROWS}
