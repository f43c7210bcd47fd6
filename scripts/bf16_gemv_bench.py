"""Micro-benchmark: bfloat16 matrix-vector products at SmolLM2-135M's shapes, every library kernel side by side (issue 19).

One "pass" = one decode step's matmuls at batch 1: per layer qkv 960x576, out 576x576, gate_up 3072x576,
down 576x1536, times 30 layers, then the head 49152x576 (269 MB of bfloat16, read once). Each candidate
makes passes over the same weights, the candidates taking turns; best of --repeats. Effective GB/s =
weight bytes / pass time; the floor = weight bytes / the streaming read bandwidth (x.sum() of 256 MB,
engine/labs/hardware.py). Compiled candidates report their first call (the compile) separately: run the
script twice with the same TORCHINDUCTOR_CACHE_DIR for cold and warm-process numbers.

    flock /tmp/tb/bench.lock .venv/bin/python scripts/bf16_gemv_bench.py [--only a,b] [--autotune]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.labs.hardware import measure_read_bandwidth  # noqa: E402
from engine.techniques.kernel_candidates import apply, available, prepare  # noqa: E402

LAYER = [(960, 576), (576, 576), (3072, 576), (576, 1536)]  # (N, K): qkv, out, gate_up, down
HEAD = (49152, 576)
EAGER = ("plain", "aten-gemv", "prepacked", "onednn")


def matvec_reduce(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (M, K) @ w (N, K)ᵀ written as a float32 reduction inductor can fuse into one loop reading bfloat16."""
    return (x[:, None, :].float() * w[None].float()).sum(-1).to(x.dtype)  # (M, 1, K) * (1, N, K) -> (M, N)


def matvec_reduce_split(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same reduction with K split in 4 (more partial sums in flight, if inductor keeps them apart)."""
    m, k = x.shape
    parts = (x.view(m, 1, 4, k // 4).float() * w.view(1, -1, 4, k // 4).float()).sum(-1)  # (M, N, 4)
    return parts.sum(-1).to(x.dtype)  # (M, N)


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def many(fn):
    def run(xs: list[torch.Tensor], ws: list[torch.Tensor]) -> list[torch.Tensor]:
        return [fn(x, w) for x, w in zip(xs, ws)]
    return run


class Stack(nn.Module):
    """The matrices as nn.Linear modules (freezing turns module weights into constants the CPP template packs)."""

    def __init__(self, ws: list[torch.Tensor]):
        super().__init__()
        self.lins = nn.ModuleList()
        for w in ws:
            lin = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
            lin.weight = nn.Parameter(w, requires_grad=False)
            self.lins.append(lin)

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [lin(x) for lin, x in zip(self.lins, xs)]


def build(layers: int, dtype: torch.dtype):
    gen = torch.Generator().manual_seed(0)
    shapes = LAYER * layers + [HEAD]
    ws = [(torch.randn(n, k, generator=gen) / k**0.5).to(dtype) for n, k in shapes]  # (N, K) each
    xk = {k: torch.randn(1, k, generator=gen).to(dtype) for _, k in shapes}  # (1, K)
    xs = [xk[k] for _, k in shapes]
    return ws, xs


def candidates(ws, xs, names: set[str], autotune: bool) -> dict:
    """{name: (pass function, first-call seconds)}; the first call of a compiled one is its compile."""
    out = {}
    per_layer = len(LAYER)
    for k in EAGER:
        if k in names and available(k, ws[0].dtype):
            extras = [prepare(k, w, 1) for w in ws]
            out[k] = (lambda k=k, extras=extras: [apply(k, x, w, None, e) for x, w, e in zip(xs, ws, extras)], 0.0)
    if "prepacked-b1" in names:  # oneDNN's packed layout chosen for a batch of one
        packed = [torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in ws]
        out["prepacked-b1"] = (lambda: [torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
                                        for x, p in zip(xs, packed)], 0.0)
    if "stream-read" in names:  # the floor, side by side: x.sum() over as many float32 bytes as the weights
        big = torch.ones(sum(w.numel() for w in ws) // 2)
        out["stream-read"] = (lambda: big.sum(), 0.0)
    comp = {}
    if "compile-linear" in names:  # one compiled F.linear per call (a graph per shape)
        f = torch.compile(linear)
        comp["compile-linear"] = lambda: [f(x, w) for x, w in zip(xs, ws)]
    if "compile-reduce" in names:  # one compiled reduction per call
        g = torch.compile(matvec_reduce)
        comp["compile-reduce"] = lambda: [g(x, w) for x, w in zip(xs, ws)]
    if "compile-reduce-split" in names:
        g2 = torch.compile(matvec_reduce_split)
        comp["compile-reduce-split"] = lambda: [g2(x, w) for x, w in zip(xs, ws)]
    groups = [slice(i, i + per_layer) for i in range(0, len(ws) - 1, per_layer)] + [slice(len(ws) - 1, None)]
    if "compile-layer-reduce" in names:  # one compiled call per layer (its four matrices), the head alone
        h = torch.compile(many(matvec_reduce))
        comp["compile-layer-reduce"] = lambda: [h(xs[g], ws[g]) for g in groups]
    if "compile-layer-linear" in names:
        h2 = torch.compile(many(linear))
        comp["compile-layer-linear"] = lambda: [h2(xs[g], ws[g]) for g in groups]
    if "compile-all-reduce" in names:  # every matrix in one compiled call: the kernels without per-call costs
        a = torch.compile(many(matvec_reduce))
        comp["compile-all-reduce"] = lambda: a(xs, ws)
    for name, fn in comp.items():
        start = time.perf_counter()
        with torch.inference_mode():
            fn()
        out[name] = (fn, time.perf_counter() - start)
    if autotune:  # inductor's CPP GEMM template: max-autotune + freezing, per-layer modules
        import torch._inductor.config as ic
        with ic.patch(freezing=True, max_autotune=True, max_autotune_gemm_backends=os.environ.get("GEMM_BACKENDS", "CPP,ATEN")):
            n = len(ws) - 1
            mods = [Stack(ws[i:i + per_layer]).eval() for i in range(0, n, per_layer)] + [Stack(ws[n:]).eval()]
            fns = [torch.compile(m) for m in mods]
            args = [xs[i:i + per_layer] for i in range(0, n, per_layer)] + [xs[n:]]
            start = time.perf_counter()
            with torch.no_grad():
                for f, a in zip(fns, args):
                    f(a)
            out["max-autotune-cpp"] = (lambda: [f(a) for f, a in zip(fns, args)], time.perf_counter() - start)
    return out


def check(ws, xs, cands) -> dict[str, float]:
    """Largest |difference| from float32 maths, relative to the largest output, per candidate."""
    want = [(x.float() @ w.float().T) for x, w in zip(xs, ws)]
    errs = {}
    for name, (fn, _) in cands.items():
        if name == "stream-read":
            errs[name] = 0.0
            continue
        with torch.no_grad():
            got = fn()
        flat = [t for g in got for t in (g if isinstance(g, (list, tuple)) else [g])]
        errs[name] = max(float((g.float() - w).abs().max() / w.abs().max()) for g, w in zip(flat, want))
    return errs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="stream-read,plain,prepacked-b1,compile-reduce-split,aten-gemv,prepacked,onednn,"
                    "compile-linear,compile-reduce,compile-layer-reduce,compile-layer-linear,compile-all-reduce")
    ap.add_argument("--autotune", action="store_true", help="also inductor's CPP GEMM template (slow to compile)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 64  # a graph per shape and per list length, shared by the `many` wrappers
    read = measure_read_bandwidth(torch.device("cpu"))
    ws, xs = build(args.layers, torch.bfloat16)
    nbytes = sum(w.numel() * w.element_size() for w in ws)
    floor = nbytes / read
    t0 = time.perf_counter()
    cands = candidates(ws, xs, set(args.only.split(",")), args.autotune)
    errs = check(ws, xs, cands)
    times = {k: [] for k in cands}
    names = list(cands)
    with torch.inference_mode():
        for r in range(args.repeats + 1):
            for name in names[r % len(names):] + names[: r % len(names)]:
                start = time.perf_counter()
                cands[name][0]()
                if r:
                    times[name].append(time.perf_counter() - start)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {args.layers} layers + head: "
          f"{nbytes / 1e6:.0f} MB bf16; streaming read {read / 1e9:.1f} GB/s -> floor {1e3 * floor:.2f} ms; "
          f"setup+check {time.perf_counter() - t0:.1f} s")
    side = min(times["stream-read"]) if "stream-read" in times else float("nan")  # the floor, in the same rounds
    print(f"{'candidate':24s} {'best ms':>8s} {'GB/s':>6s} {'x floor':>8s} {'x read':>7s} {'first call s':>12s} {'max rel err':>11s}")
    for name in sorted(names, key=lambda n: min(times[n])):
        best = min(times[name])
        print(f"{name:24s} {1e3 * best:8.2f} {nbytes / best / 1e9:6.1f} {best / floor:8.2f} {best / side:7.2f} "
              f"{cands[name][1]:12.1f} {errs[name]:11.1e}")
    print("# x floor: vs the read measured once before the rounds; x read: vs stream-read timed in the same rounds")


if __name__ == "__main__":
    main()
