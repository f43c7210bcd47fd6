"""Where a long prefill's time goes on this CPU: one pass vs chunks, side by side, and per-op categories.

`python -m engine.labs.prefill_split --tokens 1024 --chunks 0 512 256` times one prefill of the same real-text
prompt whole (0) and in chunks, the variants taking turns, best of a few rounds, and prints the profiler's
split of one whole pass into GEMMs by shape, the attention kernel, RoPE, norms, the MLP's SiLU x up, residual
adds and cache copies. On a machine other programs share, `--threads 1 --cpu-time` measures the process's
CPU seconds instead of wall time: one thread has no partner to wait for at the end of each parallel op, so
other programs' load (which wall time on 2 threads magnifies op by op) leaves its numbers nearly unchanged.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch
from torch.profiler import profile

from engine.core.generate import new_cache, prefill
from engine.labs.profiling import KIND_ATTN, KIND_GEMM, KIND_GEMV, classify_kind
from engine.labs.sweeps import prompt_ids_of_length
from engine.loading.model_store import DEFAULT_MODEL
from engine.techniques.prefill_chunks import prefill_chunked
from engine.techniques.prompt_kernels import MARKS

CATEGORIES = (  # (category, op names): what each aten op of a Llama prefill belongs to
    ("RoPE (neg, cat, mul, add on q/k)", ()),
    ("norms (RMSNorm pieces)", ("aten::pow", "aten::sum", "aten::mean", "aten::rsqrt", "aten::div_", "aten::_fused_rms_norm")),
    ("MLP SiLU x up", ("aten::silu",)),
    ("KV cache writes and fills", ("aten::copy_", "aten::fill_", "aten::zero_")),
)


C_KERNELS = {MARKS["attention"]: "attention in C (with RoPE and the cache write)", MARKS["rms_norm"]: "norms in C (with the residual add)",
             MARKS["silu_mul"]: "MLP SiLU x up in C"}  # the prompt's C kernels (prompt_kernels.py), where the fast model runs them


def categorize(name: str, shapes: list) -> str:
    """One op event -> its category; GEMMs are split by their weight's shape ('GEMM 3072x576')."""
    if name in C_KERNELS:
        return C_KERNELS[name]
    kind = classify_kind(name, shapes)  # the profiling lab's matmul and attention ops
    if kind in (KIND_GEMM, KIND_GEMV):
        weight = next((s for s in reversed(shapes[1:]) if isinstance(s, list) and len(s) == 2), None)  # the matrix
        return f"GEMM {weight[0]}x{weight[1]}" if weight else "GEMM"
    if kind == KIND_ATTN:
        return "attention kernel"
    for category, names in CATEGORIES:
        if name in names:
            return category
    dims = [len(s) for s in shapes if isinstance(s, list) and s]
    if name in ("aten::neg", "aten::cat") or (name in ("aten::mul", "aten::add") and 4 in dims):
        return "RoPE (neg, cat, mul, add on q/k)"  # the only 4-d (B, heads, T, D) element-wise ops in a block
    same = len(shapes) >= 2 and shapes[0] == shapes[1] and len(shapes[0]) == 3  # two (B, T, X) operands
    if name == "aten::mul":
        return "MLP SiLU x up" if same else "norms (RMSNorm pieces)"  # x * rstd (B, T, 1) and * weight (C,)
    if name == "aten::add":
        return "residual adds" if same else "norms (RMSNorm pieces)"  # mean + eps
    return "other"


def split_ms(events) -> dict[str, float]:
    """Self time (ms) per category from profiler events grouped by input shape, largest first."""
    ms: dict[str, float] = defaultdict(float)
    for e in events:
        ms[categorize(e.key, e.input_shapes or [])] += e.self_cpu_time_total / 1000
    return dict(sorted(ms.items(), key=lambda kv: -kv[1]))


def time_variants(lm, n_tokens: int, chunks: list[int], rounds: int = 4, cpu_time: bool = False) -> dict[int, float]:
    """Best ms per variant (0 = one pass, else the chunk size), the variants taking turns each round."""
    ids = torch.tensor([prompt_ids_of_length(lm, n_tokens)], device=lm.device)  # (1, T)
    clock = time.process_time if cpu_time else time.perf_counter

    def once(chunk: int) -> float:
        cache = new_cache(lm, 1, n_tokens + 1)
        start = clock()
        prefill(lm, ids, cache) if chunk == 0 else prefill_chunked(lm, ids, cache, chunk)
        return clock() - start

    times: dict[int, list[float]] = {c: [] for c in chunks}
    for r in range(rounds + 1):  # round 0 warms up
        for c in chunks[r % len(chunks):] + chunks[: r % len(chunks)]:
            t = once(c)
            if r:
                times[c].append(t)
    return {c: 1000 * min(v) for c, v in times.items()}


def profile_whole(lm, n_tokens: int) -> tuple[dict[str, float], float]:
    """(ms per category, total self ms) of one whole-prompt prefill under torch.profiler."""
    ids = torch.tensor([prompt_ids_of_length(lm, n_tokens)], device=lm.device)  # (1, T)
    prefill(lm, ids, new_cache(lm, 1, n_tokens + 1))  # warm
    cache = new_cache(lm, 1, n_tokens + 1)
    with profile(record_shapes=True) as prof:
        prefill(lm, ids, cache)
    ms = split_ms(prof.key_averages(group_by_input_shape=True))
    return ms, sum(ms.values())


def main(argv: list[str] | None = None) -> None:
    from engine.loading.loader import load_model, set_threads

    ap = argparse.ArgumentParser(prog="python -m engine.labs.prefill_split", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--kernels", default="fast", choices=("fast", "plain"))
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--chunks", type=int, nargs="+", default=[0, 512, 256], help="0 = one pass")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--cpu-time", action="store_true", help="process CPU seconds instead of wall time")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args(argv)
    set_threads(args.threads)
    lm = load_model(args.model, device="cpu", kernels=args.kernels)
    what = "CPU ms" if args.cpu_time else "wall ms"
    print(f"# {lm.name}, {args.tokens} tokens, {torch.get_num_threads()} threads, {lm.kernels}; best of {args.rounds}, {what}")
    for chunk, ms in time_variants(lm, args.tokens, args.chunks, args.rounds, args.cpu_time).items():
        print(f"{'one pass' if chunk == 0 else f'chunks of {chunk}':>16}: {ms:8.1f}")
    if not args.no_profile:
        ms, total = profile_whole(lm, args.tokens)
        print(f"# one pass under torch.profiler: {total:.1f} ms of op self time")
        for category, v in ms.items():
            print(f"{category:>36}: {v:8.1f} ms  {100 * v / total:5.1f} %")


if __name__ == "__main__":
    main()
