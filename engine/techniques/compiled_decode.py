"""The decode step compiled: one generated C++ loop nest per layer instead of ~30 library calls and Python between them.

A batch-1 decode step on CPU reads every weight once; what it loses beyond that read is per call: each oneDNN
matmul costs ~10 µs before it streams (descriptor and primitive lookup), each small op ~1-8 µs of dispatch, and
the Python between them. torch.compile (inductor) turns one layer's decode — RMSNorm, the fused QKV product,
RoPE, the cache write, attention over the cache, the output product, RMSNorm, SwiGLU — into a few generated
loops. The matrix-vector products are written as reductions (x * W).sum(-1), so inductor generates its own
vectorised loops that stream the plain weights, with the norms and activations fused into them.

One layer is compiled once and called for every layer (the weights are its inputs), with the cache length
symbolic (mark_dynamic), so one compile serves every cache length. After that first compile the layer is called
through the code dynamo generated for it, as a plain function: no guard evaluation, no frame hook (~30 µs per layer
call, ~1 ms a step; vLLM dispatches its compiled model the same way). What the guards would have checked is fixed
here by construction (one model's weights, its dtype, one row; the cache's view with any length and stride), the
generated code asserts sizes and strides itself, and a cache it cannot serve (more rows, another dtype) runs the
eager loop, counted. The compiled layer (dynamo's code and inductor's kernels, from torch.compile's `aot_compile`)
is saved in the model cache, so a later process reads it instead of tracing and compiling again. Whether the
compiled step is used is measured on this machine, against the eager flat loop (`Transformer.decode_rows`), and
the verdict cached beside the matmul kernels' choice; compiling costs seconds the first time. Batch-1
Llama-family decode on CPU only: a batch's rows would each read the weights again in these loops, and GPT-2,
biases or other devices keep the eager paths.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import time
import types
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.core.kv_cache import KVCache, Plan
from engine.core.layers import rms_norm, rotate_rows
from engine.techniques.kernel_choice import MARGIN, _key_id, _read, add_to_cache_file, cache_key, default_cache_dir, switched_off

CACHE_FILE = "compiled-decode.json"
SWITCH = "TWO_BENDS_COMPILED_DECODE"  # "off": never compile (the test suite's default; a user's escape hatch)
CONTEXT = 128  # the context the eager and compiled steps are timed at
CHECKED = 24  # the context the compiled step is checked at: the same code for every length, without 128-token prefills
NO_COMPILER = "no C++ compiler here (torch.compile writes C++ on CPU: install g++, or set CXX)"
VERSION = 2  # of make_layer and its call: a changed layer is measured again, never judged by an older one's verdict
STEPS, ROUNDS = 8, 3  # steps per timed round; rounds, the two taking turns (the best round counts)


@dataclass
class Verdict:
    use: bool  # True: the compiled step is faster here and gives the eager step's tokens
    eager_ms: float
    compiled_ms: float
    compile_s: float  # seconds to compile and warm up in the process that measured (or this one)
    cached: bool = False
    note: str = ""  # why not used, when it is not

    def words(self) -> str:
        timing = f"compiled {self.compiled_ms:.1f} ms vs eager {self.eager_ms:.1f} ms per step at context {CONTEXT}"
        if self.note:
            return f"decode step eager: {self.note}"
        where = "cached verdict" if self.cached else "measured now"
        return f"decode step {'compiled' if self.use else 'eager'} ({timing}; {where}; compiling took {self.compile_s:.1f} s)"


def applicable(model, device: torch.device) -> str:
    """'' when the compiled step can serve this model here, else why not."""
    cfg = model.cfg
    if off := switched_off(SWITCH):
        return off
    if device.type != "cpu":
        return "CPU only (CUDA has CUDA graphs)"
    if not cfg.uses_rope or cfg.qkv_bias:
        return "Llama family without biases only"
    if short := too_short_to_time(cfg):
        return short
    if cxx_compiler() is None:  # inductor would import, trace and then fail: seconds in every process, for nothing
        return NO_COMPILER
    return ""


def too_short_to_time(cfg) -> str:
    """'' when a decode step (this one or c_decode.py's) can be timed at CONTEXT in this model's context, else why not."""
    if cfg.max_seq_len < CONTEXT + STEPS + 1:
        return f"models of a context of at least {CONTEXT + STEPS + 1} tokens only (the step is timed at {CONTEXT})"
    return ""


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use on this machine (CXX, else g++; clang++ on macOS), None when it is missing."""
    name = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    return shutil.which(name)


def _gemv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (1, K), w (N, K) -> (1, N) as a reduction inductor generates itself (no library call)."""
    return (x[:, None, :] * w[None]).sum(-1)


def make_layer(H: int, K: int, D: int, eps: float):
    """One layer's decode for one sequence: x (1, C) -> (1, C), writing this token's K and V at `pos`."""
    scale = 1.0 / math.sqrt(D)

    def layer(x, cos, sin, k, v, pos, n1, wqkv, wout, n2, wgu, wdown):  # k, v (1, K, S, D): the cache's views
        qkv = _gemv(rms_norm(x, n1, eps), wqkv).view(1, H + 2 * K, D)  # (1, H+2K, D)
        qk = rotate_rows(qkv[:, : H + K], cos, sin)  # (1, H+K, D)
        k.index_copy_(2, pos, qk[:, H:, None])  # (1, K, 1, D) into position pos (pos < S: the cache itself)
        v.index_copy_(2, pos, qkv[:, H + K:, None])
        q = qk[:, :H].view(1, K, H // K, D)  # (1, K, G, D): each KV head's queries
        scores = (q[:, :, :, None, :] * k[:, :, None]).sum(-1).float() * scale  # (1, K, G, S)
        probs = scores.softmax(-1).to(v.dtype)
        y = (probs[..., None] * v[:, :, None]).sum(-2)  # (1, K, G, D)
        x = x + _gemv(y.reshape(1, H * D), wout)  # (1, C)
        gate, up = _gemv(rms_norm(x, n2, eps), wgu).chunk(2, dim=-1)  # (1, F) each
        return x + _gemv(F.silu(gate) * up, wdown)  # (1, C)

    return layer


class CompiledDecode:
    """The compiled step of one model: `__call__(ids (1, 1), cache, plan) -> logits (1, V)`, as decode_rows."""

    def __init__(self, model, saved: Path | None = None):
        cfg = model.cfg
        self.saved = saved  # where the compiled layer is kept between processes (None: compiled in each process)
        self.loaded = False  # True: this process read the compiled layer from `saved` (no trace, no compile)
        self.model = model
        self.dtype = model.tok_emb.weight.dtype
        source = make_layer(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.norm_eps)
        # a code object of its own: dynamo keeps its compiled code per code object, so this model compiles once
        # (a same-shaped model compiled earlier in this process would otherwise hand over no new code to take)
        self.source = types.FunctionType(source.__code__.replace(), source.__globals__, "decode_layer", None,
                                         source.__closure__)
        self.layer = None  # dynamo's code for `source`, called as a plain function: set by the first step
        self.weights = [(b.attn_norm.weight, b.attn.qkv.weight, b.attn.out.weight, b.mlp_norm.weight,
                         b.mlp.gate_up.weight, b.mlp.down.weight) for b in model.blocks]
        self.fallbacks = 0  # steps that ran eager (a cache the compiled layer was not made for), counted
        self._compiling = threading.Lock()

    @torch.inference_mode()  # its own tensors always inference tensors, as when compiled
    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor:
        m = self.model
        if cache.keys[0].shape[0] != 1 or cache.keys[0].dtype != self.dtype:  # compiled for one row of this dtype
            return self._eager(ids, cache, plan)
        start, S = plan.positions.start, plan.read_len  # write at start, read [0, S)
        pos = torch.tensor([start])
        x = F.embedding(ids[:, 0], m.tok_emb.weight)  # (1, C)
        cos, sin = m.rope_row(start, x.dtype)  # (D,) each
        cos = cos.clone()  # a tensor of its own, as when compiled (a row of the table is a view at an offset)
        layer = self.layer or self._compile
        try:
            for i, ws in enumerate(self.weights):
                k, v = cache.keys[i][:, :, :S], cache.values[i][:, :, :S]  # (1, K, S, D) views
                x = layer(x, cos, sin, k, v, pos, *ws)
                layer = self.layer
        except AssertionError:  # the generated code's own size/stride check refused an input: this step eager
            return self._eager(ids, cache, plan)  # (rewrites every layer's K, V at this position)
        if plan.advance:
            cache.advance(1)
        return m.lm_head(m.final_norm(x)).float()

    def _compile(self, *args) -> torch.Tensor:
        """Compile the layer on these inputs (or read it as compiled by an earlier process), keep its code, run it."""
        with self._compiling:
            if self.layer is None:
                compiled = self._load()
                if compiled is None:
                    k, v = args[3], args[4]
                    torch._dynamo.mark_dynamic(k, 2)  # one compiled layer for every cache length
                    torch._dynamo.mark_dynamic(v, 2)
                    # nothing dynamic but the cache length: dynamo would otherwise make the closure's sizes and floats
                    # symbolic once another model's layer (same code, other numbers) compiled in this process
                    with torch._dynamo.config.patch(automatic_dynamic_shapes=False), _inductor_settings(built_here=False):
                        compiled = torch.compile(self.source, fullgraph=True).aot_compile((args, {}))
                    self._save(compiled)
                # the code dynamo generated for the layer, called as a plain function (no guards, no frame hook)
                self.layer = compiled.fn
        return self.layer(*args)

    def _load(self):
        """The layer as an earlier process compiled it (dynamo's code and inductor's kernels, from `saved`), else None.

        Skips dynamo's trace and inductor's cache lookup (~2.5 s of ~7 s on a slow 2-vCPU host); what it gives is
        checked against the eager step like a fresh compile (measure), and anything unreadable is compiled again."""
        if self.saved is None or not self.saved.is_file():
            return None
        try:
            # the kernels were built on this machine before (the folder is keyed by its CPU and flags, and the result is
            # checked against the eager step): inductor's instruction-set test build (a subprocess, ~0.6 s here) skipped
            with _inductor_settings(built_here=True), open(self.saved, "rb") as f:
                compiled = torch.compiler.load_compiled_function(f, f_globals=self.source.__globals__)
        except Exception:  # another torch, a cut file, a moved cache: compile again (and overwrite it)
            return None
        self.loaded = True
        return compiled

    def _save(self, compiled) -> None:
        if self.saved is None:
            return
        try:
            self.saved.parent.mkdir(parents=True, exist_ok=True)
            compiled.save_compiled_function(str(self.saved))  # written to a temporary file, then renamed
        except Exception:  # a read-only cache: compiled again by the next process, as before
            pass

    def _eager(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor:
        self.fallbacks += 1  # counted: the run's Trace says how many of its steps ran eager
        return self.model.decode_rows(ids, cache, plan)


def _inductor_settings(built_here: bool):
    """Inductor's settings for compiling and for reading the layer back: the same build command both times.

    Header precompiling off: it preprocesses inductor's headers in every process (~0.3 s here) to speed up a new
    build, and it is part of the build command, so a layer built with it would be built again without it."""
    import torch._inductor.config as inductor

    return inductor.patch({"cpp_cache_precompile_headers": False} | ({"cpp.vec_isa_ok": True} if built_here else {}))


# ------------------------------------------------------------------------------------------------
# Measured here: compile, check against the eager step, time both taking turns; the verdict cached
# ------------------------------------------------------------------------------------------------
def _steps(step, cache: KVCache) -> float:
    """Seconds for STEPS decode steps from CONTEXT cached tokens (the cache's length put back afterwards)."""
    ids = torch.ones(1, 1, dtype=torch.long)
    start = time.perf_counter()
    for _ in range(STEPS):
        step(ids, cache, cache.plan(1)).argmax(-1).tolist()
    seconds = time.perf_counter() - start
    cache.lengths[:] = CONTEXT
    return seconds


@torch.inference_mode()
def measure(model, dtype: torch.dtype, time_it: bool = True,
            saved: Path | None = None) -> tuple[CompiledDecode | None, Verdict]:
    """Compile, warm up at two lengths beside decode_rows (same tokens, logits close), then time both taking turns."""
    begin = time.perf_counter()
    compiled = CompiledDecode(model, saved)
    ids = torch.ones(1, 1, dtype=torch.long)
    tol = 1e-3 if dtype == torch.float32 else 5e-2  # half types: eager rounds after every op, inductor at stores

    def filled(context: int, size: int, inference: bool) -> KVCache:  # a real prefix: attention over real keys
        with torch.inference_mode(inference):  # a cache made outside inference mode is another kind of tensor
            cache = KVCache(model.cfg, 1, size, dtype, "cpu")
        model(torch.arange(context).remainder(model.cfg.vocab_size)[None], cache)  # (1, context) prompt
        return cache

    # the first step compiles; then each kind of cache, two steps: partly read (its view strided), then read to its
    # end (contiguous): the one compiled layer serves them all, with the eager step's numbers. Checked at a short
    # context (the cache length is symbolic: one generated code for every length); a 128-token prefill per cache
    # took ~0.5 s each on a slow 2-vCPU host, in every process that compiles
    for inference in (True, False):
        eager_cache, cache = filled(CHECKED, CHECKED + 2, inference), filled(CHECKED, CHECKED + 2, inference)
        for _ in range(2):
            want = model.decode_rows(ids, eager_cache, eager_cache.plan(1))  # (1, V)
            got = compiled(ids, cache, cache.plan(1))  # (1, V)
            close = float((got - want).abs().max()) <= tol * float(want.abs().max())
            if got.argmax(-1).tolist() != want.argmax(-1).tolist() or not close:
                if compiled.loaded:  # what an earlier process saved is wrong here: never read again
                    saved.unlink(missing_ok=True)
                return None, Verdict(False, 0.0, 0.0, time.perf_counter() - begin, note="its logits differed from the eager step's")
    compile_s = time.perf_counter() - begin
    cache = filled(CONTEXT if time_it else CHECKED + 5, CONTEXT + STEPS + 1, True)  # (the timing's context)
    compiled(ids, cache, cache.plan(1))  # another length in another cache
    if compiled.fallbacks:
        return None, Verdict(False, 0.0, 0.0, compile_s, note="its compiled layer refused another cache's layout")
    if not time_it:
        return compiled, Verdict(True, 0.0, 0.0, compile_s)
    cache.lengths[:] = CONTEXT
    best = {"eager": math.inf, "compiled": math.inf}
    for r in range(ROUNDS):
        for name in (("eager", "compiled") if r % 2 else ("compiled", "eager")):
            best[name] = min(best[name], _steps(model.decode_rows if name == "eager" else compiled, cache))
    eager_ms, compiled_ms = (1000 * best[k] / STEPS for k in ("eager", "compiled"))
    use = compiled_ms < eager_ms * (1 - MARGIN)
    return (compiled if use else None), Verdict(use, eager_ms, compiled_ms, compile_s)


def attach(model, dtype: torch.dtype, device: torch.device, cache_dir: Path | None = None,
           remeasure: bool = False) -> Verdict:
    """Give `model` its compiled decode step where measured faster here (call only where `applicable` says '').

    The verdict is cached by the kernel choice's key (CPU, flags, torch, threads, dtype) and the model's shape: a
    machine where compiling lost never compiles again; one where it won compiles once per process."""
    folder = cache_dir or default_cache_dir()
    # generated code kept with the model, per instruction set: inductor's own cache key missed an ISA cap here (code
    # generated under AVX-512, read back under ATEN_CPU_CAPABILITY=avx2, gave wrong logits; a home folder shared by
    # an AVX2 and an AVX-512 machine would do the same), so the folder is keyed like the kernel choice
    machine = {k: v for k, v in cache_key(model, dtype).items() if k not in ("dtype", "shapes", "threads")}
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder / "inductor" / _key_id(machine)))
    path = folder / CACHE_FILE
    key = verdict_key(model, dtype)
    found = None if remeasure else _cached(_read(path)[0].get(_key_id(key)), key)
    if found is not None and not found.use:
        return found
    try:
        saved = folder / "inductor" / _key_id(machine) / f"decode-layer-{_key_id(key)}.bin"  # dynamo's and inductor's
        compiled, verdict = measure(model, dtype, time_it=found is None, saved=saved)  # won before: no timing
    except Exception as exc:  # no C++ compiler, an inductor error: the eager loop, and the reason said
        return Verdict(False, 0.0, 0.0, 0.0, note=f"torch.compile failed here ({type(exc).__name__}: {str(exc)[:120]})")
    if found is not None and compiled is not None:
        verdict = replace(found, compile_s=verdict.compile_s)
    else:
        _save(path, key, verdict)
    model.compiled_decode = compiled
    return verdict


def verdict_key(model, dtype: torch.dtype) -> dict:
    """What makes a verdict valid: this CPU, torch, threads and dtype (the kernel choice's key), this model's shape."""
    cfg = model.cfg
    return cache_key(model, dtype) | {"shapes": model_shape(cfg), "what": "compiled decode step", "version": VERSION, "context": CONTEXT}


def _save(path: Path, key: dict, verdict) -> None:
    """Write a verdict (any of the techniques' dataclasses) for `key`, less its `cached` flag: what `_cached` reads."""
    add_to_cache_file(path, key, "verdict", {k: v for k, v in asdict(verdict).items() if k != "cached"})


def model_shape(cfg) -> list[int]:
    """The shape a verdict holds for: a model of another shape is measured again."""
    return [cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.vocab_size]


def _cached(entry, key: dict, kind=Verdict):
    """The verdict (a `kind`) an earlier process wrote for this key, marked cached; None when there is none (or it is
    unreadable). Serves c_decode.py's verdicts too."""
    try:
        return kind(**entry["verdict"], cached=True) if entry["key"] == key else None
    except (KeyError, TypeError):
        return None
