"""The decode step compiled: one generated C++ loop nest per layer instead of ~30 library calls and Python between them.

torch.compile (inductor) turns one layer's batch-1 decode (norms, the fused QKV product, RoPE, the cache write,
attention, the output product, SwiGLU) into a few generated loops; the matrix-vector products are written as
reductions (x * W).sum(-1) so inductor streams the plain weights itself. One layer is compiled once and called for
every layer (the weights are its inputs), the cache length symbolic, and called afterwards through dynamo's
generated code as a plain function (no guards per call). A cache it cannot serve runs the eager loop, counted. The
compiled layer is saved in the model cache for later processes. The second decode-step candidate: tried only where
the C step (c_decode.py) cannot serve or lost, since compiling costs seconds. Why and what was measured:
docs/decisions/compiled-decode-layer.md.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import types
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.core.backends import TORCH, Backends, TorchOps
from engine.core.kv_cache import KVCache, Plan
from engine.core.layers import rms_norm, rotate_rows
from engine.techniques import step_race
from engine.techniques.fast_paths import Fit, model_key
from engine.techniques.measured_cache import key_id, machine_key

VERSION = 2  # of make_layer and its call: a changed layer is measured again, never judged by an older one's verdict
NO_COMPILER = "no C++ compiler here (torch.compile writes C++ on CPU: install g++, or set CXX)"


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

    kind = "torch.compile"

    def __init__(self, model, saved: Path | None = None, ops: TorchOps = TORCH):
        cfg = model.cfg
        self.ops = ops  # the eager loop's kernels, for a step the generated code refuses
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

    def serves(self, cache: KVCache, plan: Plan) -> bool:
        """One row of the model's dtype (what it was compiled for)."""
        return cache.keys[0].shape[0] == 1 and cache.keys[0].dtype == self.dtype

    @torch.inference_mode()  # its own tensors always inference tensors, as when compiled
    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor:
        m = self.model
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
        return self.model.decode_rows(ids, cache, plan, self.ops)


def _inductor_settings(built_here: bool):
    """Inductor's settings for compiling and for reading the layer back: the same build command both times.

    Header precompiling off: it preprocesses inductor's headers in every process (~0.3 s here) to speed up a new
    build, and it is part of the build command, so a layer built with it would be built again without it."""
    import torch._inductor.config as inductor

    return inductor.patch({"cpp_cache_precompile_headers": False} | ({"cpp.vec_isa_ok": True} if built_here else {}))


class CompiledDecodeStep(step_race.DecodeStepPath):
    """The fast path (fast_paths.FastPath): torch.compile's decode step against the eager flat loop."""

    name = "decode step compiled (torch.compile)"
    fast = "compiled"

    def fit(self, lm, backends: Backends) -> Fit:
        cfg = lm.model.cfg
        if lm.device.type != "cpu":
            return Fit.no("CPU only (CUDA has CUDA graphs)")
        if not cfg.uses_rope or cfg.qkv_bias:
            return Fit.no("Llama family without biases only")
        context = step_race.context_fit(cfg)
        if not context.ok:
            return context
        if cxx_compiler() is None:  # inductor would import, trace and then fail: seconds in every process, for nothing
            return Fit.no(NO_COMPILER, said=True)
        return Fit.yes()

    def key(self, lm) -> dict:
        return model_key(lm.model.cfg) | {"version": VERSION, "context": step_race.CONTEXT}

    def build(self, lm, backends: Backends, folder: Path) -> CompiledDecode:
        # generated code kept with the model, per instruction set: inductor's own cache key missed an ISA cap here
        # (code generated under AVX-512, read back under ATEN_CPU_CAPABILITY=avx2, gave wrong logits; a home folder
        # shared by an AVX2 and an AVX-512 machine would do the same), so the folder is keyed by the machine
        machine = {k: v for k, v in machine_key(lm.model, lm.dtype).items() if k not in ("dtype", "shapes", "threads")}
        inductor = folder / "inductor" / key_id(machine)
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(inductor))
        saved = inductor / f"decode-layer-{key_id(machine_key(lm.model, lm.dtype) | self.key(lm))}.bin"
        return CompiledDecode(lm.model, saved, backends.ops)

    @torch.inference_mode()
    def check(self, lm, backends: Backends, step: CompiledDecode) -> bool:
        """The first step compiles; then each kind of cache (made inside inference mode and outside it), two steps
        beside the eager loop: the one compiled layer serves them all, with the eager step's numbers; then one step
        at another length in another cache, served without falling back."""
        model = lm.model
        ok = all(step_race.same_steps(model, backends, step, inference) for inference in (True, False))
        if ok:
            cache = step_race.filled(model, backends, step_race.CHECKED + 5, step_race.CONTEXT + step_race.STEPS + 1)
            step(torch.ones(1, 1, dtype=torch.long), cache, cache.plan(1))
            ok = step.fallbacks == 0
        if not ok and step.loaded:  # what an earlier process saved is wrong here: never read again
            step.saved.unlink(missing_ok=True)
        return ok



COMPILED_DECODE_STEP = CompiledDecodeStep()
