"""Micro-benchmark: causal prefill attention at SmolLM2's shapes, SDPA vs flex_attention vs compiled variants.

Per layer q (1, 9, T, 64), k/v (1, 3, T, 64), float32, 2 threads; best of N; GFLOP/s of the causal half
(2 matmuls x 2 FLOP x H x T^2/2 x D). Run under `flock /tmp/tb/bench.lock`. Each variant can run in its own
process (`--variants sdpa,flex`): every torch.compile(flex_attention) shares one dynamo cache (8 recompiles, then eager).
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

H, K, D = 9, 3, 64


def causal_gflop(T: int) -> float:
    return 2 * 2 * H * T * T * D / 2 / 1e9


def best_of(fn, n: int) -> float:
    fn()
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def sdpa_repeat(q, k, v):
    r = H // K
    return F.scaled_dot_product_attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), is_causal=True)


def sdpa_math(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        return sdpa(q, k, v)


def make_flex(block: int | tuple[int, int] | None, dynamic: bool, gqa: bool = True):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention, dynamic=dynamic)
    masks: dict[int, object] = {}

    def causal(b, h, qi, ki):
        return qi >= ki

    def run(q, k, v):
        T = q.shape[2]
        if T not in masks:
            kw = {} if block is None else {"BLOCK_SIZE": block}
            masks[T] = create_block_mask(causal, None, None, T, T, device="cpu", **kw)
        if not gqa:
            r = H // K
            k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
        return compiled(q, k, v, block_mask=masks[T], enable_gqa=gqa)
    return run


def make_flex_fold():
    """GQA folded into the query axis: each KV head's 3 query heads become one (3T)-row query; mask uses q_idx % T."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention, dynamic=False)
    masks: dict[int, object] = {}

    def run(q, k, v):
        B, _, T, _ = q.shape
        if T not in masks:
            masks[T] = create_block_mask(lambda b, h, qi, ki: qi % T >= ki, None, None, (H // K) * T, T, device="cpu")
        folded = q.reshape(B, K, (H // K) * T, D)  # (B, K, H/K*T, D): query heads of one KV head stacked
        return compiled(folded, k, v, block_mask=masks[T]).view(B, H, T, D)  # (B, H, T, D)
    return run


def make_compiled_sdpa():
    return torch.compile(sdpa, dynamic=False)


def variants(name: str):
    if name == "sdpa":
        return sdpa
    if name == "sdpa_repeat":
        return sdpa_repeat
    if name == "sdpa_math":
        return sdpa_math
    if name == "compiled_sdpa":
        return make_compiled_sdpa()
    if name == "flex_fold":
        return make_flex_fold()
    if name.startswith("flex"):  # flex, flex_b64, flex_b64x256 (q x kv), flex_dyn, flex_norep
        sizes = [int(b) for b in name.split("_b")[1].split("_")[0].split("x")] if "_b" in name else None
        block = None if sizes is None else sizes[0] if len(sizes) == 1 else tuple(sizes)  # (q block, kv block)
        return make_flex(block, dynamic="dyn" in name, gqa="rep" not in name)
    raise SystemExit(f"unknown variant {name}")


def inputs(T: int, dtype: torch.dtype):
    g = torch.Generator().manual_seed(T)
    q = torch.randn(1, H, T, D, generator=g).to(dtype)  # (B, H, T, D)
    k = torch.randn(1, K, T, D, generator=g).to(dtype)  # (B, K, T, D)
    v = torch.randn(1, K, T, D, generator=g).to(dtype)  # (B, K, T, D)
    return q, k, v


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variants", default="sdpa,sdpa_repeat,flex")
    p.add_argument("--tokens", default="128,512,1024")
    p.add_argument("--n", type=int, default=10, help="rounds; every round times each variant once, interleaved")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    names = args.variants.split(",")
    fns = {name: variants(name) for name in names}
    for T in [int(t) for t in args.tokens.split(",")]:
        q, k, v = inputs(T, dtype)
        ref = sdpa(q.float(), k.float(), v.float())
        first, err, best = {}, {}, {name: float("inf") for name in names}
        with torch.no_grad():
            for name in names:  # first call: compile (cold or from inductor's on-disk cache)
                t0 = time.perf_counter()
                out = fns[name](q, k, v)
                first[name] = time.perf_counter() - t0
                err[name] = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            for _ in range(args.n):  # interleaved, so load from other work hits every variant alike
                for name in names:
                    best[name] = min(best[name], best_of(lambda f=fns[name], a=(q, k, v): f(*a), 1))
        base = best.get("sdpa")
        for name in names:
            row = {"variant": name, "T": T, "dtype": args.dtype, "ms": round(best[name] * 1e3, 3),
                   "gflops": round(causal_gflop(T) / best[name], 1),
                   "vs_sdpa": None if base is None else round(base / best[name], 2),
                   "first_call_s": round(first[name], 2), "max_rel_err": float(f"{err[name]:.2e}")}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
