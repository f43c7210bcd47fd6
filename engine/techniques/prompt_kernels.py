"""A prompt's work between its matrix products in hand-written C (prompt_kernels.c): attention, the norms, SwiGLU.

A float32 prompt pass spends a noticeable share of its time outside the matrix products, in torch ops that each
read and write the whole (tokens x width) activations. Three C kernels take that work, a few calls a layer:
  attention   RoPE, the KV cache write and causal flash attention in one call, in blocks of 64 keys with those
              above the diagonal skipped, each key and value read once for all the query heads of its KV head.
  rms_norm    the residual add and the norm after it in one pass over each row.
  silu_mul    SwiGLU's SiLU(gate) * up in one pass over the gate/up projection's rows.
Chosen by measurement like every fast path (fast_paths.py; docs/decisions/c-kernels.md). float32 only, batch 1,
Llama family without biases, head dims a multiple of 16.
"""
from __future__ import annotations

import ctypes
import hashlib
import time
from dataclasses import replace
from pathlib import Path

import torch

from engine.core.backends import Backends, TorchOps, run_pass
from engine.core.kv_cache import KVCache, Plan, RaggedPlan
from engine.techniques import c_build
from engine.techniques.fast_paths import Fit, model_key, take_turns

SOURCE = Path(__file__).with_name("prompt_kernels.c")
ABI = 1  # prompt_kernels.c's prompt_kernels_abi(): the functions and arguments below
P, LONG, INT, FLOAT = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float
TIMED_TOKENS = 512  # the prompt length one layer's work is timed at
CHECKED = (40, 24)  # the check's prompt, then a second prompt on top of it (a cached prefix)
ROUNDS, REPEATS = 3, 4  # timed rounds, the two taking turns (the best counts); calls per round
TOLERANCE = 1e-4  # of the outputs' scale: float32 both ways, sums in another order
MAX_GROUP = 8  # query heads per KV head the attention tile holds


def timed_tokens(cfg) -> int:
    """The prompt length the race times: TIMED_TOKENS, or the model's whole context where that is shorter."""
    return min(TIMED_TOKENS, cfg.max_seq_len)


def load(path: Path) -> ctypes.CDLL:
    """The built library, its interface checked; a file that cannot be loaded is removed (the next load builds again)."""
    lib = c_build.load(path, "prompt_kernels_abi", ABI)
    lib.prompt_attention.argtypes = [P, LONG, INT, INT, INT, P, P, P, P, LONG, LONG, P, INT]
    lib.prompt_attention.restype = INT
    lib.rms_norm.argtypes = [P, P, P, P, LONG, INT, FLOAT, INT]
    lib.rms_norm.restype = None
    lib.silu_mul.argtypes = [P, P, LONG, LONG, INT]
    lib.silu_mul.restype = None
    return lib


MARKS = {"attention": "two_bends::prompt_attention (C)", "rms_norm": "two_bends::rms_norm (C)",
         "silu_mul": "two_bends::silu_mul (C)"}  # what torch.profiler calls each kernel's time (no aten op shows it)


def _marked(kernel: str):
    """A profiler range named after the kernel (the profiling labs' splits count the C time; a few microseconds when
    no profiler records, on passes of more than WIDE_PASS tokens)."""
    return torch.profiler.record_function(MARKS[kernel])


class CPromptOps(TorchOps):
    """A float32 prompt's ops with the three C kernels: the products through `matmuls` (the kernels chosen here), the
    rest in C. Every tensor whose address a call takes is a local of that call (no address outlives it)."""

    name = "C"
    fused_attention = True

    def __init__(self, cfg, lib: ctypes.CDLL, matmuls: TorchOps):
        self.cfg, self.lib, self.matmuls = cfg, lib, matmuls
        self.calls = 0  # attention calls served (tests and the check read it)

    def linear(self, m, x: torch.Tensor) -> torch.Tensor:
        return self.matmuls.linear(m, x)

    def serves(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> bool:
        """One row of more than a few tokens on the CPU, a plain prompt plan (positions start..end, every earlier key
        seen), a one-row float32 cache whose layers are each in one piece."""
        if ids.shape[0] != 1 or ids.device.type != "cpu":
            return False
        if isinstance(plan, RaggedPlan) or not isinstance(plan.positions, slice) or plan.mask is not None:
            return False
        if plan.read_len != plan.positions.stop:
            return False
        return all(t.shape[0] == 1 and t.dtype == torch.float32 and t.is_contiguous()
                   for t in (*cache.keys, *cache.values))

    def attention(self, qkv: torch.Tensor, rope: tuple, layer: int, cache: KVCache, plan: Plan) -> torch.Tensor:
        """qkv (1, T, (H + 2K) D), the fused projection's output; rope (cos, sin) (T, D) -> (1, T, H D). Writes the
        new keys (rotated) and values into the cache at the plan's positions."""
        cfg = self.cfg
        T = qkv.shape[1]
        qkv = qkv.contiguous()
        cos, sin = (t.contiguous() for t in rope)  # (T, D) each
        k, v = cache.keys[layer], cache.values[layer]  # (1, K, smax, D) each
        out = torch.empty(1, T, cfg.n_heads * cfg.head_dim)  # (1, T, H D)
        with _marked("attention"):
            failed = self.lib.prompt_attention(qkv.data_ptr(), T, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                                               cos.data_ptr(), sin.data_ptr(), k.data_ptr(), v.data_ptr(), k.shape[2],
                                               plan.positions.start, out.data_ptr(), torch.get_num_threads())
        if failed:
            raise MemoryError("the C prompt attention could not allocate its scratch")
        self.calls += 1
        return out

    def norm(self, norm, x: torch.Tensor) -> torch.Tensor:
        return self._rms_norm(x, norm)

    def add_norm(self, x: torch.Tensor, a: torch.Tensor, norm) -> tuple[torch.Tensor, torch.Tensor]:
        """x += a in place (x is the residual stream, this pass's own tensor), then norm(x) as a new tensor."""
        return x, self._rms_norm(x, norm, add=a)

    def _rms_norm(self, x: torch.Tensor, norm, add: torch.Tensor | None = None) -> torch.Tensor:
        """x (1, T, C) in one piece; `norm` an RMSNorm (weight, eps)."""
        x = x if x.is_contiguous() else x.contiguous()
        add = None if add is None else add.contiguous()
        out = torch.empty_like(x)
        C = x.shape[-1]
        with _marked("rms_norm"):
            self.lib.rms_norm(x.data_ptr(), None if add is None else add.data_ptr(), norm.weight.data_ptr(),
                              out.data_ptr(), x.numel() // C, C, norm.eps, torch.get_num_threads())
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """gate_up (1, T, 2F), the fused projection's output -> SiLU(gate) * up (1, T, F)."""
        gate_up = gate_up.contiguous()
        F2 = gate_up.shape[-1]
        out = gate_up.new_empty(*gate_up.shape[:-1], F2 // 2)
        with _marked("silu_mul"):
            self.lib.silu_mul(gate_up.data_ptr(), out.data_ptr(), gate_up.numel() // F2, F2 // 2,
                              torch.get_num_threads())
        return out


class CPromptKernels:
    """The fast path (fast_paths.FastPath): the prompts' C kernels against torch's ops."""

    name = "prompts' attention, norms and SwiGLU in C"
    fast, rival = "C", "torch"

    def timed_at(self, lm) -> str:
        return f"a layer at {timed_tokens(lm.model.cfg)} tokens"

    def fit(self, lm, backends: Backends) -> Fit:
        cfg = lm.model.cfg
        if lm.device.type != "cpu":
            return Fit.no("CPU only")
        if lm.dtype != torch.float32:
            return Fit.no("float32 only")
        if (cfg.arch != "llama" or not cfg.uses_rope or cfg.qkv_bias or cfg.n_heads % cfg.n_kv_heads
                or cfg.head_dim % 16 or cfg.n_heads // cfg.n_kv_heads > MAX_GROUP):
            return Fit.no("Llama family without biases, head dims a multiple of 16, only")
        if cfg.max_seq_len <= sum(CHECKED):
            return Fit.no(f"models of a context over {sum(CHECKED)} tokens only (their check's two prompts)")
        return c_build.toolchain_fit()

    def key(self, lm) -> dict:
        cfg = lm.model.cfg
        return model_key(cfg) | {"source": hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16], "tokens": timed_tokens(cfg)}

    def build(self, lm, backends: Backends, folder: Path) -> CPromptOps:
        return CPromptOps(lm.model.cfg, load(c_build.build(folder, SOURCE)), backends.ops)

    @torch.inference_mode()
    def check(self, lm, backends: Backends, ops: CPromptOps) -> bool:
        """A prompt, then a second one on top of it, both ways: every position's logits and the caches within
        TOLERANCE of their scale, the same next tokens, and every layer's attention in C."""
        model = lm.model
        size = sum(CHECKED) + 1
        ours, theirs = (KVCache(model.cfg, 1, size, torch.float32) for _ in range(2))
        with_ops = self.attach(backends, ops)
        calls = ops.calls
        for seed, T in enumerate(CHECKED):
            ids = torch.randint(0, model.cfg.vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
            want = run_pass(model, backends, ids, theirs, all_logits=True)[0]  # (1, T, V)
            got = run_pass(model, with_ops, ids, ours, all_logits=True)[0]
            if not close(got, want) or not torch.equal(got.argmax(-1), want.argmax(-1)):
                return False
        if not all(close(mine, other) for mine, other in zip(ours.keys + ours.values, theirs.keys + theirs.values)):
            return False
        return ops.calls - calls == len(CHECKED) * model.cfg.n_layers

    @torch.inference_mode()
    def race(self, lm, backends: Backends, ops: CPromptOps) -> tuple[float, float]:
        """(C ms, torch ms) for the first block of a `timed_tokens`-token prompt (its products the same both ways):
        best of ROUNDS rounds of REPEATS, the two taking turns."""
        model = lm.model
        cfg = model.cfg
        T = timed_tokens(cfg)
        cache = KVCache(cfg, 1, T, torch.float32)
        plan = cache.plan(T)
        rope = (model.rope_cos[plan.positions], model.rope_sin[plan.positions])  # (T, D) each
        x = torch.randn(1, T, cfg.d_model, generator=torch.Generator().manual_seed(0))  # (1, T, C)
        block = model.blocks[0]
        for way in (ops, backends.ops):
            block(x.clone(), 0, cache, plan, rope, False, way)  # warm

        def layer(way: TorchOps) -> float:
            inputs = [x.clone() for _ in range(REPEATS)]  # the C path adds to its residual stream in place
            begin = time.perf_counter()
            for xi in inputs:
                block(xi, 0, cache, plan, rope, False, way)
            return (time.perf_counter() - begin) / REPEATS

        best = take_turns({"c": lambda: layer(ops), "torch": lambda: layer(backends.ops)}, ROUNDS)
        return 1000 * best["c"], 1000 * best["torch"]

    def attach(self, backends: Backends, ops: CPromptOps) -> Backends:
        return replace(backends, prompt_ops=ops)


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return float((got - want).abs().max()) <= TOLERANCE * float(want.abs().max())


C_PROMPT_KERNELS = CPromptKernels()
