"""The decode step as one hand-written C loop nest (decode_step.c): every layer and the head in one parallel region.

Where torch runs each layer as ~30 library calls, each ending at a fork/join of the threads, this step is one call
a token: the ~120 matrix-vector products stream the weights back to back, each row front to back, with a barrier
only where one part needs the last part's result; attention reads each key row from memory once for its KV head's
queries (four keys at a time), weighs the values with 64 dims in registers, and splits the positions between the
threads, joined by their softmax sums (flash-decoding's split). Weights and cache in float32 or bfloat16 (widened
as they are read), batch 1, Llama family without biases, CPU.

Built on this machine at first use (c_build.py), checked against the step that runs without it (the eager flat
loop) and timed against it (step_race.py), kept only where faster (fast_paths.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import threading
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.core.backends import Backends
from engine.core.kv_cache import KVCache, Plan
from engine.techniques import c_build, step_race
from engine.techniques.fast_paths import Fit, model_key

SOURCE = Path(__file__).with_name("decode_step.c")
ABI = 3  # decode_step.c's decode_step_abi(): the Model/Layer layout below
P = ctypes.c_void_p
DTYPES = (torch.float32, torch.bfloat16)  # of the weights and the KV cache (the activations are float32 throughout)
LAYER_FIELDS = ("n1", "wqkv", "wout", "n2", "wgu", "wdown", "k", "v")
SCRATCH = ("x", "h", "qkv", "scores", "part", "att", "gu", "act")


class Layer(ctypes.Structure):
    _fields_ = [(name, P) for name in LAYER_FIELDS]


class Model(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_int) for name in ("L", "C", "H", "KH", "D", "F", "bf16")]
                + [("V", ctypes.c_long), ("smax", ctypes.c_long), ("eps", ctypes.c_float)]
                + [(name, P) for name in ("layers", "nfinal", "whead", *SCRATCH)])


def layout_in_c(lib: ctypes.CDLL) -> list[int]:
    """The library's own sizeof and offsets of Layer, then Model (decode_step_layout)."""
    out = (ctypes.c_long * 64)()
    n = lib.decode_step_layout(out, 64)
    return list(out[:n])


def expected_layout() -> list[int]:
    return c_build.layout(Layer) + c_build.layout(Model)


def load(path: Path) -> ctypes.CDLL:
    """The built library, its interface and struct layout checked against the ctypes structures above."""
    lib = c_build.load(path, "decode_step_abi", ABI)
    lib.decode_step_layout.argtypes = [ctypes.POINTER(ctypes.c_long), ctypes.c_int]
    if layout_in_c(lib) != expected_layout():
        path.unlink(missing_ok=True)
        raise OSError(f"{path.name} lays out its structures differently from c_decode.py's")
    lib.decode_step.argtypes = [P, P, P, ctypes.c_long, ctypes.c_long, P, ctypes.c_int]
    lib.decode_step.restype = None
    return lib


class CDecode:
    """The C step of one model: `__call__(ids (1, 1), cache, plan) -> logits (1, V)`, as decode_rows.

    Every address the C structures hold belongs to a tensor this object holds (`pinned`); the cache's addresses
    are set for the one call and cleared after it."""

    kind = "C"

    def __init__(self, model, lib: ctypes.CDLL):
        cfg = model.cfg
        self.model, self.lib, self.cfg = model, lib, cfg
        self.dtype = model.tok_emb.weight.dtype
        self.fallbacks = 0  # steps it could not serve (counted by backends.run_pass)
        self.pinned = c_build.Pinned()
        head = model.tok_emb.weight if cfg.tie_embeddings else model.lm_head.weight  # (V, C)
        self.layers = (Layer * cfg.n_layers)()
        for i, (layer, b) in enumerate(zip(self.layers, model.blocks)):
            # the matrices as they are (contiguous() is the tensor itself for the model's own weights); the norms'
            # weights as float32 copies (a few KB)
            for name, w in (("n1", b.attn_norm.weight.float()), ("wqkv", b.attn.qkv.weight), ("wout", b.attn.out.weight),
                            ("n2", b.mlp_norm.weight.float()), ("wgu", b.mlp.gate_up.weight),
                            ("wdown", b.mlp.down.weight)):
                setattr(layer, name, self.pinned.address(f"{i}.{name}", w.detach().contiguous()))
        self.head = self.pinned.address("head", head.detach().contiguous())
        self.norm = self.pinned.address("norm", model.final_norm.weight.detach().float().contiguous())
        self.logits = torch.empty(1, cfg.vocab_size, dtype=torch.float32)  # (1, V): written by each call
        self.smax = self.threads = 0  # the scratch's room: positions and threads (`_room`)
        self.struct: Model | None = None
        self._lock = threading.Lock()  # one step at a time: the scratch is the instance's

    def _room(self, smax: int, threads: int) -> None:
        """Scratch for caches of `smax` positions and `threads` threads (kept, grown when a bigger one comes)."""
        cfg = self.cfg
        H, KH, D, C, Fd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_model, cfg.d_ff
        if self.struct is not None and smax <= self.smax and threads <= self.threads:
            return
        self.smax, self.threads = max(smax, self.smax), max(threads, self.threads)
        sizes = {"x": C, "h": self.threads * C, "qkv": (H + 2 * KH) * D, "scores": H * self.smax,
                 "part": KH * self.threads * (H // KH) * (D + 2), "att": H * D, "gu": 2 * Fd, "act": Fd}
        scratch = {name: self.pinned.address(f"scratch.{name}", torch.zeros(n, dtype=torch.float32))
                   for name, n in sizes.items()}
        self.struct = Model(cfg.n_layers, C, H, KH, D, Fd, int(self.dtype == torch.bfloat16), cfg.vocab_size, self.smax,
                            cfg.norm_eps, ctypes.cast(self.layers, P), self.norm, self.head,
                            *[scratch[name] for name in SCRATCH])

    def serves(self, cache: KVCache, plan: Plan) -> bool:
        """One row of the model's dtype on the CPU, each layer's (K, smax, D) in one piece, a position it can write."""
        k0 = cache.keys[0]
        return (k0.shape[0] == 1 and k0.dtype == self.dtype and k0.device.type == "cpu"
                and plan.read_len <= k0.shape[2] and plan.positions.start < plan.read_len
                and all(t.is_contiguous() for t in (*cache.keys, *cache.values)))

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor:
        m = self.model
        start, S = plan.positions.start, plan.read_len  # write at start, read [0, S)
        threads = torch.get_num_threads()
        with self._lock:
            smax = cache.keys[0].shape[2]
            self._room(smax, threads)
            self.struct.smax = smax  # this cache's row stride (the scratch holds at least as many positions)
            self.pinned.held("scratch.x").copy_(F.embedding(ids[0, :1], m.tok_emb.weight)[0])  # (C,), widened to float32
            cos, sin = (t.contiguous() for t in m.rope_row(start, torch.float32))  # (D,) each
            try:
                for i, (layer, k, v) in enumerate(zip(self.layers, cache.keys, cache.values)):
                    layer.k, layer.v = self.pinned.address(f"{i}.k", k), self.pinned.address(f"{i}.v", v)
                self.lib.decode_step(ctypes.byref(self.struct), self.pinned.address("cos", cos),
                                     self.pinned.address("sin", sin), start, S, self.logits.data_ptr(), threads)
                logits = self.logits.clone()  # (1, V)
            finally:  # the cache is the caller's: no address of it stays behind
                for i, layer in enumerate(self.layers):
                    layer.k = layer.v = None
                    self.pinned.release(f"{i}.k", f"{i}.v")
                self.pinned.release("cos", "sin")
        if plan.advance:
            cache.advance(1)
        return logits


class CDecodeStep(step_race.DecodeStepPath):
    """The fast path (fast_paths.FastPath): the C decode step against the eager flat loop."""

    name = "decode step in C"
    fast = "C"

    def fit(self, lm, backends: Backends) -> Fit:
        cfg = lm.model.cfg
        if lm.device.type != "cpu":
            return Fit.no("CPU only")
        if lm.dtype not in DTYPES:
            return Fit.no("float32 and bfloat16 only")
        if not cfg.uses_rope or cfg.qkv_bias or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2 or cfg.head_dim > 512:
            return Fit.no("Llama family without biases only")
        context = step_race.context_fit(cfg)
        return context if not context.ok else c_build.toolchain_fit()

    def key(self, lm) -> dict:
        return model_key(lm.model.cfg) | {"source": hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16], "context": step_race.CONTEXT}

    def build(self, lm, backends: Backends, folder: Path) -> CDecode:
        return CDecode(lm.model, load(c_build.build(folder, SOURCE)))

    def check(self, lm, backends: Backends, step: CDecode) -> bool:
        return step_race.same_steps(lm.model, backends, step) and step.fallbacks == 0



C_DECODE_STEP = CDecodeStep()
