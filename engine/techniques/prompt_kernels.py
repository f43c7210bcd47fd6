"""A prompt's work between its matrix products in hand-written C (prompt_kernels.c): attention, the norms, SwiGLU.

A float32 prompt pass spends about a fifth of its time outside the matrix products, in torch ops that each read
and write the whole (tokens x width) activations, some on strided views. Three C kernels take that work, a few
calls a layer:
  attention   RoPE, the KV cache write and causal flash attention in one call. Torch's CPU flash kernel takes keys
              in blocks of 512, so a 512-token prompt computes the whole score matrix and masks its upper half;
              this one takes blocks of 64 and skips those above the diagonal, reads each key and value once for
              all the query heads of its KV head, and writes the (T, H * D) layout the output projection reads.
  rms_norm    the residual add and the norm after it in one pass over each row.
  silu_mul    SwiGLU's SiLU(gate) * up in one pass over the gate/up projection's rows (torch: two ops on
              strided halves).
vLLM's CPU backend writes the same three in C++ for the same reasons.

Chosen by measurement like the other kernels: at first load it is built (c_decode.build: gcc -O3 -march=native,
~1 s, kept in the model cache), checked against torch's ops (a prompt, then a second prompt on top of it: outputs
and caches close) and one layer's work between its products is timed both ways at TIMED_TOKENS tokens, taking
turns; kept only if more than MARGIN faster, the verdict cached beside the decode step's. float32 only (a bfloat16
model's prompts run in bfloat16, or through prompt_pass.py's float32 copy into a bfloat16 cache: both keep torch's
ops), batch 1, Llama family without biases, head dims a multiple of 16.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.core.kv_cache import KVCache, Plan, RaggedPlan
from engine.techniques.c_decode import build, c_compiler
from engine.techniques.compiled_decode import _cached, _save, model_shape
from engine.techniques.kernel_choice import MARGIN, _key_id, _read, cache_key, default_cache_dir, switched_off

SOURCE = Path(__file__).with_name("prompt_kernels.c")
SWITCH = "TWO_BENDS_C_PROMPT"  # "off": never build them (the test suite's default; a user's escape hatch)
CACHE_FILE = "compiled-decode.json"  # beside the decode steps' verdicts, told apart by their key's "what"
ABI = 1  # prompt_kernels.c's prompt_kernels_abi(): the functions and arguments below
P, LONG, INT, FLOAT = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float
TIMED_TOKENS = 512  # the prompt length one layer's work is timed at
CHECKED = (40, 24)  # the check's prompt, then a second prompt on top of it (a cached prefix)
ROUNDS, REPEATS = 3, 4  # timed rounds, the two taking turns (the best counts); calls per round
TOLERANCE = 1e-4  # of the outputs' scale: float32 both ways, sums in another order
MAX_GROUP = 8  # query heads per KV head the attention tile holds


@dataclass
class Verdict:
    use: bool  # True: the C kernels are faster here and agree with torch's ops
    torch_ms: float  # one layer's work between its products (norms, RoPE, cache write, attention, SwiGLU)
    c_ms: float
    build_s: float  # seconds to build (or find) the library and check it
    cached: bool = False
    note: str = ""  # why not used, when it could not be (a failed build, other outputs)
    tokens: int = TIMED_TOKENS  # the prompt length timed (a model of a shorter context: its whole context)

    def words(self) -> str:
        if self.note:
            return f"prompt kernels not in C: {self.note}"
        timing = f"C {self.c_ms:.2f} ms vs torch {self.torch_ms:.2f} ms a layer at {self.tokens} tokens"
        where = "cached verdict" if self.cached else "measured now"
        chosen = "in C" if self.use else "torch's (not in C)"
        return f"prompt attention, norms and SwiGLU {chosen} ({timing}; {where})"


def applicable(model, dtype: torch.dtype, device: torch.device) -> str:
    """'' when the C kernels can serve this model's prompts here, else why not."""
    cfg = model.cfg
    if off := switched_off(SWITCH):
        return off
    if device.type != "cpu":
        return "CPU only"
    if dtype != torch.float32:
        return "float32 only"
    if (cfg.arch != "llama" or not cfg.uses_rope or cfg.qkv_bias or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 16
            or cfg.n_heads // cfg.n_kv_heads > MAX_GROUP):
        return "Llama family without biases, head dims a multiple of 16, only"
    if cfg.max_seq_len <= sum(CHECKED):
        return f"models of a context over {sum(CHECKED)} tokens only (their check's two prompts)"
    if c_compiler() is None:
        return "no C compiler here (install gcc, or set CC)"
    return ""


def timed_tokens(cfg) -> int:
    """The prompt length the race times: TIMED_TOKENS, or the model's whole context where that is shorter."""
    return min(TIMED_TOKENS, cfg.max_seq_len)


def load(path: Path) -> ctypes.CDLL:
    """The built library, its functions checked; a file that cannot be loaded is removed (the next load builds again)."""
    try:
        lib = ctypes.CDLL(str(path))
        if lib.prompt_kernels_abi() != ABI:
            raise OSError(f"{path.name} was built for other arguments")
    except OSError:
        path.unlink(missing_ok=True)
        raise
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
    """A profiler range named after the kernel while torch.profiler records (the profiling labs' splits count the C
    time), else nothing (a check costs one C call)."""
    return torch.profiler.record_function(MARKS[kernel]) if torch._C._autograd._profiler_enabled() else nullcontext()


class PromptKernels:
    """The three kernels for one model's prompts, where `serves` says they can (model.Transformer.forward asks)."""

    def __init__(self, cfg, lib: ctypes.CDLL):
        self.cfg, self.lib = cfg, lib
        self.calls = 0  # attention calls served (tests and the check read it)

    def __deepcopy__(self, memo) -> PromptKernels:
        return self  # a loaded library and the model's shape: a copied model (a twin, a quantised copy) shares them

    def serves(self, x: torch.Tensor, cache: KVCache, plan: Plan) -> bool:
        """x (1, T, C) float32 on the CPU in one piece, a plain prompt plan (positions start..end, every earlier key
        seen), a one-row float32 cache whose layers are each in one piece."""
        if x.shape[0] != 1 or x.dtype != torch.float32 or x.device.type != "cpu" or not x.is_contiguous():
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

    def rms_norm(self, x: torch.Tensor, norm, add: torch.Tensor | None = None) -> torch.Tensor:
        """x (1, T, C) in one piece; with `add`, x += add first (in place: x is the residual stream). Returns
        norm(x) as a new tensor; `norm` an RMSNorm (weight, eps)."""
        if add is not None:
            add = add.contiguous()
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


# ------------------------------------------------------------------------------------------------
# Measured here: build, check against torch's ops, time one layer of a prompt both ways
# ------------------------------------------------------------------------------------------------
@contextmanager
def _serving(model, kernels: PromptKernels | None):
    """`model` with `kernels` (None: torch's ops) for the block, restored after."""
    before, model.prompt_kernels = model.prompt_kernels, kernels
    try:
        yield model
    finally:
        model.prompt_kernels = before


@torch.inference_mode()
def check(model, kernels: PromptKernels) -> bool:
    """A prompt, then a second one on top of it, both ways: every position's logits and the caches within
    TOLERANCE of their scale, the same next tokens."""
    size = sum(CHECKED) + 1
    ours, eager = (KVCache(model.cfg, 1, size, torch.float32) for _ in range(2))
    calls = kernels.calls
    for seed, T in enumerate(CHECKED):
        ids = torch.randint(0, model.cfg.vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
        with _serving(model, None):
            want = model(ids, eager, all_logits=True)[0]  # (1, T, V)
        with _serving(model, kernels):
            got = model(ids, ours, all_logits=True)[0]
        if float((got - want).abs().max()) > TOLERANCE * float(want.abs().max()):
            return False
        if not torch.equal(got.argmax(-1), want.argmax(-1)):
            return False
    for mine, theirs in zip(ours.keys + ours.values, eager.keys + eager.values):
        if float((mine - theirs).abs().max()) > TOLERANCE * float(theirs.abs().max()):
            return False
    return kernels.calls - calls == len(CHECKED) * model.cfg.n_layers  # every layer's attention ran in C


@torch.inference_mode()
def race(model, kernels: PromptKernels) -> tuple[float, float]:
    """(C ms, torch ms) for the first block of a `timed_tokens`-token prompt (its products the same both ways):
    best of ROUNDS rounds of REPEATS, the two taking turns."""
    cfg = model.cfg
    T = timed_tokens(cfg)
    cache = KVCache(cfg, 1, T, torch.float32)
    plan = cache.plan(T)
    rope = (model.rope_cos[plan.positions], model.rope_sin[plan.positions])  # (T, D) each
    x = torch.randn(1, T, cfg.d_model, generator=torch.Generator().manual_seed(0))  # (1, T, C)
    block = model.blocks[0]
    ways = {"c": kernels, "torch": None}
    best = {name: math.inf for name in ways}
    for fused in ways.values():
        block(x.clone(), 0, cache, plan, rope, False, fused)  # warm
    for r in range(ROUNDS):
        for name in (("c", "torch") if r % 2 else ("torch", "c")):
            inputs = [x.clone() for _ in range(REPEATS)]  # the C path adds to its residual stream in place
            begin = time.perf_counter()
            for xi in inputs:
                block(xi, 0, cache, plan, rope, False, ways[name])
            best[name] = min(best[name], (time.perf_counter() - begin) / REPEATS)
    return 1000 * best["c"], 1000 * best["torch"]


_LOCK = threading.Lock()  # one build and measurement at a time in a process


def attach(model, dtype: torch.dtype, cache_dir: Path | None = None, remeasure: bool = False) -> Verdict:
    """Give `model` the C prompt kernels where they were measured faster here (call where `applicable`);
    the verdict, timed now and cached when there was none."""
    folder = cache_dir or default_cache_dir()
    path, key = folder / CACHE_FILE, verdict_key(model, dtype)
    with _LOCK:
        found = None if remeasure else _cached(_read(path)[0].get(_key_id(key)), key, Verdict)
        if found is not None and not found.use:
            return found
        begin = time.perf_counter()
        try:
            kernels = PromptKernels(model.cfg, load(build(folder, SOURCE)))
            ok = check(model, kernels)
        except Exception as exc:  # a failed build, a library of other arguments: torch's ops, the reason said
            return Verdict(False, 0.0, 0.0, 0.0, note=f"could not build them here ({type(exc).__name__}: {str(exc)[:160]})")
        build_s = time.perf_counter() - begin
        if not ok:
            verdict = Verdict(False, 0.0, 0.0, build_s, note="their outputs differed from torch's")
        elif found is not None:  # won here before: no timing
            model.prompt_kernels = kernels
            return Verdict(True, found.torch_ms, found.c_ms, build_s, cached=True, tokens=found.tokens)
        else:
            try:
                c_ms, torch_ms = race(model, kernels)
            except Exception as exc:  # the race could not run here: torch's ops, the reason said (not cached)
                return Verdict(False, 0.0, 0.0, build_s, note=f"could not time them here ({type(exc).__name__}: "
                                                               f"{str(exc)[:160]})")
            verdict = Verdict(c_ms < torch_ms * (1 - MARGIN), torch_ms, c_ms, build_s, tokens=timed_tokens(model.cfg))
        _save(path, key, verdict)
        if verdict.use:
            model.prompt_kernels = kernels
        return verdict


def verdict_key(model, dtype: torch.dtype) -> dict:
    """This CPU, torch, threads and dtype (the kernel choice's key), this model's shape, this source."""
    cfg = model.cfg
    source = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return cache_key(model, dtype) | {"shapes": model_shape(cfg), "what": "C prompt kernels", "source": source,
                                      "tokens": timed_tokens(cfg)}
