"""The decode step as one hand-written C loop nest (decode_step.c): every layer and the head in one parallel region.

Where compiled_decode.py's generated code still makes each layer a call of its own and each matrix-vector product
a loop ending at a fork/join of the threads, this step is one call a token: the ~120 products stream the weights
back to back, each row front to back, with a barrier only where one part needs the last part's result; attention
reads each key row from memory once for its KV head's queries (four keys at a time), weighs the values with 64
dims in registers, and splits the positions between the threads, joined by their softmax sums (flash-decoding's
split). Weights and cache in float32 or bfloat16 (widened as they are read), batch 1, Llama family without
biases, CPU.

It is built on this machine at first use (gcc -O3 -march=native -fopenmp -ffast-math, ~0.5 s; the library is kept
in the model cache, named by the source, the flags, the compiler and the CPU) and loaded with ctypes (the GIL is
released while it runs; its OpenMP threads are torch's own, libgomp being loaded once). Whether it is used is
measured like the other choices: checked against the eager step (logits close, the same tokens), then timed
against the step that would run otherwise (compiled or eager), taking turns; kept only if more than 3 % faster,
the verdict cached beside the others. A machine where it won never compiles the torch.compile layer again.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.core.kv_cache import KVCache, Plan
from engine.techniques.compiled_decode import (
    CHECKED,
    CONTEXT,
    ROUNDS,
    STEPS,
    _cached,
    _save,
    _steps,
    model_shape,
    too_short_to_time,
)
from engine.techniques.kernel_choice import (
    ISA_CAPS,
    MARGIN,
    _key_id,
    _read,
    cache_key,
    cpu_identity,
    default_cache_dir,
    switched_off,
)

SOURCE = Path(__file__).with_name("decode_step.c")
SWITCH = "TWO_BENDS_C_DECODE"  # "off": never build it (the test suite's default; a user's escape hatch)
CACHE_FILE = "compiled-decode.json"  # beside the torch.compile verdicts, told apart by their key's "what"
ABI = 2  # decode_step.c's decode_step_abi(): the Model/Layer layout below
P = ctypes.c_void_p
DTYPES = (torch.float32, torch.bfloat16)  # of the weights and the KV cache (the activations are float32 throughout)
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 5e-2}  # of the logits' scale, against the eager step: bfloat16's
# eager step rounds every activation to bfloat16, this one keeps them in float32


class _Layer(ctypes.Structure):
    _fields_ = [(name, P) for name in ("n1", "wqkv", "wout", "n2", "wgu", "wdown", "k", "v")]


class _Model(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_int) for name in ("L", "C", "H", "KH", "D", "F", "bf16")]
                + [("V", ctypes.c_long), ("smax", ctypes.c_long), ("eps", ctypes.c_float)]
                + [(name, P) for name in ("layers", "nfinal", "whead", "x", "h", "qkv", "scores", "part", "att",
                                          "gu", "act")])


@dataclass
class Verdict:
    use: bool  # True: the C step is faster here than `rival` and gives the eager step's tokens
    rival: str  # the step it was timed against: "compiled" (torch.compile's layer) or "eager"
    rival_ms: float
    c_ms: float
    build_s: float  # seconds to build (or find) the library and check it, in the process that measured
    cached: bool = False
    note: str = ""  # why not used, when it could not be (no compiler, a failed build, other logits)

    def words(self) -> str:
        if self.note:
            return f"decode step not in C: {self.note}"
        timing = f"C {self.c_ms:.1f} ms vs {self.rival} {self.rival_ms:.1f} ms per step at context {CONTEXT}"
        where = "cached verdict" if self.cached else "measured now"
        chosen = "in C, one OpenMP region a step" if self.use else f"{self.rival}, not in C"
        return f"decode step {chosen} ({timing}; {where}; building and checking took {self.build_s:.1f} s)"


def c_compiler() -> str | None:
    """The C compiler to build the step with (CC, else gcc), None when there is none."""
    return shutil.which(os.environ.get("CC") or "gcc")


def applicable(model, dtype: torch.dtype, device: torch.device) -> str:
    """'' when the C step can serve this model here, else why not."""
    cfg = model.cfg
    if off := switched_off(SWITCH):
        return off
    if device.type != "cpu":
        return "CPU only"
    if dtype not in DTYPES:
        return "float32 and bfloat16 only"
    if not cfg.uses_rope or cfg.qkv_bias or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2 or cfg.head_dim > 512:
        return "Llama family without biases only"
    if short := too_short_to_time(cfg):
        return short
    if c_compiler() is None:
        return "no C compiler here (install gcc, or set CC)"
    return ""


def _flags() -> list[str]:
    """Compiling flags: -march=native, unless an instruction-set cap emulates a smaller CPU (as torch's and oneDNN's
    caps do). -ffast-math for the vector expf and free reordering of sums; compiling only (see `build`)."""
    arch = {"avx2": ["-mavx2", "-mfma"], "default": []}.get(os.environ.get("ATEN_CPU_CAPABILITY", ""), ["-march=native"])
    return ["-O3", *arch, "-fopenmp", "-ffast-math", "-fPIC"]


def build(folder: Path, source: Path = SOURCE) -> Path:
    """`source`'s library for this machine (the step's, or another hand-written kernel's), built once into `folder`
    (named by what makes it) and reused."""
    cc = c_compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    caps = [os.environ.get(name, "") for name in ISA_CAPS]
    made_of = [source.read_text(), *_flags(), *version, *cpu_identity(), *caps]
    path = folder / "c-decode" / f"{source.stem}-{hashlib.sha256(repr(made_of).encode()).hexdigest()[:20]}.so"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # compiled, then linked without -ffast-math: linked with it, gcc before 13 adds crtfastmath.o, whose constructor
    # would set flush-to-zero for the whole thread that loads the library (torch's numbers there too)
    for command in ([cc, *_flags(), "-c", str(source), "-o", f"{tmp}.o"],
                    [cc, "-shared", "-fopenmp", f"{tmp}.o", "-o", str(tmp), "-lm"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            break
    Path(f"{tmp}.o").unlink(missing_ok=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"{Path(cc).name} failed: {(done.stderr or done.stdout).strip()[-200:]}")
    os.replace(tmp, path)  # whole or not at all: another process may be reading the folder
    return path


def load(path: Path) -> ctypes.CDLL:
    """The built library, its layout checked; a file that cannot be loaded is removed (the next load builds again)."""
    try:
        lib = ctypes.CDLL(str(path))
        if lib.decode_step_abi() != ABI:
            raise OSError(f"{path.name} was built for another layout")
    except OSError:
        path.unlink(missing_ok=True)
        raise
    lib.decode_step.argtypes = [P, P, P, ctypes.c_long, ctypes.c_long, P, ctypes.c_int]
    lib.decode_step.restype = None
    return lib


class CDecode:
    """The C step of one model: `__call__(ids (1, 1), cache, plan) -> logits (1, V)`, as decode_rows."""

    def __init__(self, model, lib: ctypes.CDLL):
        cfg = model.cfg
        self.model, self.lib = model, lib
        self.dtype = model.tok_emb.weight.dtype
        self.fallbacks = 0  # steps that ran eager (a cache the C step cannot read), counted in the run's Trace
        blocks = model.blocks
        # the matrices as they are (contiguous() is the tensor itself for the model's own weights), the norms' weights
        # as float32 copies (a few KB)
        self.weights = [(b.attn_norm.weight.float().contiguous(), b.attn.qkv.weight.detach().contiguous(),
                         b.attn.out.weight.detach().contiguous(), b.mlp_norm.weight.float().contiguous(),
                         b.mlp.gate_up.weight.detach().contiguous(), b.mlp.down.weight.detach().contiguous())
                        for b in blocks]
        self.head = model.tok_emb.weight if cfg.tie_embeddings else model.lm_head.weight  # plain (V, C)
        self.head = self.head.detach().contiguous()
        self.norm = model.final_norm.weight.detach().float().contiguous()
        self.layers = (_Layer * cfg.n_layers)(*[_Layer(*[w.data_ptr() for w in ws], None, None) for ws in self.weights])
        self.smax = self.threads = 0  # the scratch's room: positions and threads (`_room`)
        self.scratch: dict[str, torch.Tensor] = {}
        self.struct = None
        self._lock = threading.Lock()  # one step at a time: the scratch is the instance's

    def _room(self, smax: int, threads: int) -> None:
        """Scratch for caches of `smax` positions and `threads` threads (kept, grown when a bigger one comes)."""
        cfg = self.model.cfg
        H, KH, D, C, Fd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_model, cfg.d_ff
        if self.struct is not None and smax <= self.smax and threads <= self.threads:
            return
        self.smax, self.threads = max(smax, self.smax), max(threads, self.threads)
        sizes = {"x": C, "h": self.threads * C, "qkv": (H + 2 * KH) * D, "scores": H * self.smax,
                 "part": KH * self.threads * (H // KH) * (D + 2), "att": H * D, "gu": 2 * Fd, "act": Fd}
        self.scratch = {name: torch.zeros(n, dtype=torch.float32) for name, n in sizes.items()}
        self.logits = torch.empty(1, cfg.vocab_size, dtype=torch.float32)
        self.struct = _Model(cfg.n_layers, C, H, KH, D, Fd, int(self.dtype == torch.bfloat16), cfg.vocab_size, self.smax,
                             cfg.norm_eps,
                             ctypes.cast(self.layers, P), self.norm.data_ptr(), self.head.data_ptr(),
                             *[self.scratch[n].data_ptr() for n in ("x", "h", "qkv", "scores", "part", "att", "gu",
                                                                    "act")])

    def readable(self, cache: KVCache, plan: Plan) -> bool:
        """Whether the C step can serve this step: one row of the model's dtype, each layer's (K, smax, D) in one piece."""
        k0 = cache.keys[0]
        return (k0.shape[0] == 1 and k0.dtype == self.dtype and k0.device.type == "cpu"
                and plan.read_len <= k0.shape[2] and plan.positions.start < plan.read_len
                and all(t.is_contiguous() for t in (*cache.keys, *cache.values)))

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor:
        if not self.readable(cache, plan):
            self.fallbacks += 1
            return self.model.decode_rows(ids, cache, plan)
        m = self.model
        start, S = plan.positions.start, plan.read_len  # write at start, read [0, S)
        threads = torch.get_num_threads()
        with self._lock:
            smax = cache.keys[0].shape[2]
            self._room(smax, threads)
            self.struct.smax = smax  # this cache's row stride (the scratch holds at least as many positions)
            for layer, k, v in zip(self.layers, cache.keys, cache.values):
                layer.k, layer.v = k.data_ptr(), v.data_ptr()
            self.scratch["x"].copy_(F.embedding(ids[0, :1], m.tok_emb.weight)[0])  # (C,), widened to float32
            cos, sin = (t.contiguous() for t in m.rope_row(start, torch.float32))  # (D,) each
            self.lib.decode_step(ctypes.byref(self.struct), cos.data_ptr(), sin.data_ptr(), start, S,
                                 self.logits.data_ptr(), threads)
            logits = self.logits.clone()  # (1, V)
        if plan.advance:
            cache.advance(1)
        return logits


# ------------------------------------------------------------------------------------------------
# Measured here: build, check against the eager step, time against the step it would replace
# ------------------------------------------------------------------------------------------------
def _filled(model, context: int, size: int) -> KVCache:
    cache = KVCache(model.cfg, 1, size, model.tok_emb.weight.dtype, "cpu")
    model(torch.arange(context).remainder(model.cfg.vocab_size)[None], cache)  # (1, context): real keys to attend
    return cache


@torch.inference_mode()
def check(model, step: CDecode) -> bool:
    """Two steps beside the eager loop at a short context: the same tokens, logits within TOLERANCE of their scale."""
    ids = torch.ones(1, 1, dtype=torch.long)
    eager_cache, cache = _filled(model, CHECKED, CHECKED + 2), _filled(model, CHECKED, CHECKED + 2)
    for _ in range(2):
        want = model.decode_rows(ids, eager_cache, eager_cache.plan(1))  # (1, V)
        got = step(ids, cache, cache.plan(1))
        if got.argmax(-1).tolist() != want.argmax(-1).tolist():
            return False
        if float((got - want).abs().max()) > TOLERANCE[step.dtype] * float(want.abs().max()):
            return False
    return step.fallbacks == 0


@torch.inference_mode()
def race(model, step: CDecode, rival) -> tuple[float, float]:
    """(C ms, rival ms) per step at CONTEXT: best of ROUNDS rounds of STEPS steps, the two taking turns."""
    cache = _filled(model, CONTEXT, CONTEXT + STEPS + 1)
    step(torch.ones(1, 1, dtype=torch.long), cache, cache.plan(1))  # warm
    cache.lengths[:] = CONTEXT
    best = {"c": math.inf, "rival": math.inf}
    for r in range(ROUNDS):
        for name in (("c", "rival") if r % 2 else ("rival", "c")):
            best[name] = min(best[name], _steps(step if name == "c" else rival, cache))
    return 1000 * best["c"] / STEPS, 1000 * best["rival"] / STEPS


def attach(model, dtype: torch.dtype, cache_dir: Path | None = None, remeasure: bool = False,
           only_if_won: bool = False) -> Verdict | None:
    """Give `model` the C step where it was measured faster here than the step it has (call where `applicable`).

    only_if_won: attach it only on a cached verdict that it won (checked again on this process's build), else None
    (so a machine where it won skips compiling the other step). Otherwise: None when a cached verdict says it lost,
    else the verdict (timed now and cached when there was none)."""
    folder = cache_dir or default_cache_dir()
    path, key = folder / CACHE_FILE, verdict_key(model, dtype)
    found = None if remeasure else _cached(_read(path)[0].get(_key_id(key)), key, Verdict)
    if only_if_won and (found is None or not found.use):
        return None
    if found is not None and not found.use:
        return found
    begin = time.perf_counter()
    try:
        step = CDecode(model, load(build(folder)))
        ok = check(model, step)
    except Exception as exc:  # a failed build, a library of another layout: the other step, the reason said
        return Verdict(False, "", 0.0, 0.0, 0.0, note=f"could not build it here ({type(exc).__name__}: {str(exc)[:160]})")
    build_s = time.perf_counter() - begin
    if not ok:
        verdict = Verdict(False, "", 0.0, 0.0, build_s, note="its logits differed from the eager step's")
        _save(path, key, verdict)
        return verdict
    if found is not None:  # won here before: no timing
        model.compiled_decode = step
        return Verdict(True, found.rival, found.rival_ms, found.c_ms, build_s, cached=True)
    rival_name = "eager" if model.compiled_decode is None else "compiled"
    c_ms, rival_ms = race(model, step, model.compiled_decode or model.decode_rows)
    verdict = Verdict(c_ms < rival_ms * (1 - MARGIN), rival_name, rival_ms, c_ms, build_s)
    _save(path, key, verdict)
    if verdict.use:
        model.compiled_decode = step
    return verdict


def verdict_key(model, dtype: torch.dtype) -> dict:
    """This CPU, torch, threads and dtype (the kernel choice's key), this model's shape, this source."""
    cfg = model.cfg
    source = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return cache_key(model, dtype) | {"shapes": model_shape(cfg), "what": "C decode step", "source": source, "context": CONTEXT}
