"""`python -m engine bench`: our engine vs transformers on the same weights, and both vs this machine's floors.

Every ratio is measured side by side in one run, alternating ours/theirs, median of `--repeats`
rounds. Floors: decode can't beat (weight + KV bytes) / measured copy bandwidth; prefill can't beat
FLOPs / measured matmul FLOP/s at the model's shapes.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from functools import partial

import torch

from engine.core.clock import now
from engine.core.generate import decode_loop, generate, greedy, new_cache, prefill
from engine.errors import EngineError
from engine.labs.hardware import measure_peaks
from engine.labs.sweeps import prompt_ids_of_length
from engine.loading.loader import load_model
from engine.perfmodel.flops import decode_step_bytes, prefill_flops


def hf_reference(lm):
    """A transformers model holding exactly our weights (same dtype and device)."""
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    from engine.loading.model_store import load_checkpoint

    ckpt = load_checkpoint(lm.source)
    config = ckpt.hf_config
    if not isinstance(config, PretrainedConfig):  # our cache's config.json, read as plain attributes
        fields = dict(vars(config))
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(ckpt.state_dict, strict=False)
    model.tie_weights()
    return model.to(lm.device, lm.dtype).eval()


def median_pair(repeats: int, ours, theirs) -> tuple[float, float]:
    """Alternate the two callables; each returns seconds. Medians of both."""
    a, b = [], []
    for _ in range(repeats):
        a.append(ours())
        b.append(theirs())
    return statistics.median(a), statistics.median(b)


def prompt_ids(lm, n: int) -> torch.Tensor:
    """(1, n) ids of real text, the same material the sweep lab uses."""
    return torch.tensor([prompt_ids_of_length(lm, n)], device=lm.device)


@torch.inference_mode()
def time_prefill_ours(lm, ids) -> float:
    cache = new_cache(lm, 1, ids.shape[1] + 1)
    start = now(lm.device)
    prefill(lm, ids, cache)
    return now(lm.device) - start


@torch.inference_mode()
def time_prefill_hf(hf, ids) -> float:
    from transformers import DynamicCache

    start = now(ids.device)
    hf(ids, cache=DynamicCache(), use_cache=True, logits_to_keep=1)
    return now(ids.device) - start


@torch.inference_mode()
def time_decode_ours(lm, ids, steps: int) -> float:
    cache = new_cache(lm, 1, ids.shape[1] + steps)
    token = greedy(prefill(lm, ids, cache))
    return statistics.mean(decode_loop(lm, token, cache, steps))


@torch.inference_mode()
def time_decode_hf(hf, ids, steps: int) -> float:
    from transformers import DynamicCache

    cache = DynamicCache()
    out = hf(ids, cache=cache, use_cache=True, logits_to_keep=1)  # the cache object fills in place
    token = out.logits[:, -1].argmax(-1, keepdim=True)
    start = now(ids.device)
    for _ in range(steps):
        out = hf(token, cache=cache, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
    return (now(ids.device) - start) / steps


@torch.inference_mode()
def bare_loop_seconds(lm, ids: list[int], new_tokens: int) -> float:
    """generate()'s work without any Trace bookkeeping: to price the bookkeeping."""
    x = torch.tensor([ids], device=lm.device)
    start = now(lm.device)
    cache = new_cache(lm, 1, len(ids) + new_tokens)
    token = greedy(prefill(lm, x, cache))
    token.tolist()
    decode_loop(lm, token, cache, new_tokens - 1)
    return now(lm.device) - start


@torch.inference_mode()
def time_decode_graphed(lm, ids, steps: int) -> float:
    from engine.techniques.cuda_graphs import GraphedDecoder

    cache = new_cache(lm, 1, ids.shape[1] + steps + 1)
    token = greedy(prefill(lm, ids, cache))
    decoder = GraphedDecoder(lm, cache)
    return statistics.mean(decode_loop(lm, token, cache, steps, step=decoder.step))


def bench_cuda_graphs(lm, contexts, steps: int, reps: int) -> None:
    """Eager decode vs the same step replayed from a CUDA graph, and whether the tokens agree."""
    for ctx in contexts:
        ids = prompt_ids(lm, ctx)
        graphed, eager = median_pair(reps, partial(time_decode_graphed, lm, ids, steps), partial(time_decode_ours, lm, ids, steps))
        print(row(f"CUDA graph decode @ {ctx}", graphed, None, None) + f"   eager {eager * 1000:.2f} ms -> {eager / graphed:.1f}x")
    a = generate(lm, prompt_ids(lm, 64)[0].tolist(), 32, ignore_eos=True)
    b = generate(lm, prompt_ids(lm, 64)[0].tolist(), 32, ignore_eos=True, cuda_graphs=True)
    print(f"# CUDA graphs: same 32 greedy tokens as eager: {a.output_ids == b.output_ids}")


def cold_load_seconds(model: str) -> tuple[float, float]:
    """import + load_model in a fresh process, from the cache: (import seconds, load seconds)."""
    code = ("import time; t=time.perf_counter(); import engine; i=time.perf_counter()-t; "
            f"lm=engine.load_model({model!r}, device='cpu'); print(i, lm.load_seconds)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imp, load = out.stdout.split()[-2:]
    return float(imp), float(load)


def row(label: str, ours: float, theirs: float | None, floor: float | None, unit: str = "ms") -> str:
    scale = 1000.0 if unit == "ms" else 1.0
    parts = [f"{label:<28}", f"{ours * scale:10.1f}"]
    parts.append(f"{theirs * scale:10.1f}" if theirs else f"{'-':>10}")
    parts.append(f"{ours / theirs:8.2f}" if theirs else f"{'-':>8}")
    parts.append(f"{floor * scale:10.1f}" if floor else f"{'-':>10}")
    parts.append(f"{ours / floor:8.2f}" if floor else f"{'-':>8}")
    return "  ".join(parts)


def run_bench(args) -> None:
    if args.repeats < 1:
        raise EngineError(f"--repeats must be at least 1 (got {args.repeats})")
    lm = load_model(args.model, args.device, args.dtype)
    print(f"# {lm.name} | {lm.device} {lm.dtype_name} | torch {torch.__version__} | {torch.get_num_threads()} threads | "
          f"{time.strftime('%Y-%m-%d')}")
    hf = hf_reference(lm)
    peaks = measure_peaks(lm.device, lm.dtype, lm.config)
    print(f"# measured floors: copy {peaks.copy_bytes_per_s / 1e9:.1f} GB/s (read+write), "
          f"matmul {peaks.matmul_flops_per_s / 1e9:.0f} GFLOP/s at ({lm.config.d_model}x{lm.config.d_ff}) shapes")
    print(f"# weights {lm.weight_bytes / 1e6:.0f} MB; ratios < 1.00 mean we are faster than transformers")
    print(f"{'measurement':<28}  {'ours ms':>10}  {'hf ms':>10}  {'ours/hf':>8}  {'floor ms':>10}  {'ours/fl':>8}")
    sizes = (32, 128) if args.quick else (128, 512, 1024)
    contexts = (32, 128) if args.quick else (128, 1024)
    reps, steps = args.repeats, (4 if args.quick else 16)
    dtype_bytes = lm.dtype.itemsize
    for n in sizes:
        ids = prompt_ids(lm, n)
        ours, theirs = median_pair(reps, partial(time_prefill_ours, lm, ids), partial(time_prefill_hf, hf, ids))
        floor = prefill_flops(lm.config, n).total / peaks.matmul_flops_per_s
        print(row(f"prefill {n} tokens", ours, theirs, floor))
    for ctx in contexts:
        ids = prompt_ids(lm, ctx)
        ours, theirs = median_pair(reps, partial(time_decode_ours, lm, ids, steps),
                                   partial(time_decode_hf, hf, ids, steps))
        floor = decode_step_bytes(lm.config, ctx + 1, 1, dtype_bytes, dtype_bytes) / peaks.copy_bytes_per_s
        print(row(f"decode step @ context {ctx}", ours, theirs, floor))
    if lm.device.type == "cuda":
        bench_cuda_graphs(lm, contexts, steps, reps)
    ids = prompt_ids(lm, 64)[0].tolist()
    new = 8 if args.quick else 32

    def ours_e2e() -> float:
        return generate(lm, ids, new, ignore_eos=True).total_seconds

    def hf_e2e() -> float:
        start = now(lm.device)
        hf.generate(torch.tensor([ids], device=lm.device), max_new_tokens=new, min_new_tokens=new, do_sample=False)
        return now(lm.device) - start

    ours, theirs = median_pair(reps, ours_e2e, hf_e2e)
    print(row(f"generate 64 + {new} tokens", ours, theirs, None))
    traced, bare = median_pair(reps + 2, ours_e2e, lambda: bare_loop_seconds(lm, ids, new))
    print(f"# Trace bookkeeping: generate() {traced * 1000:.1f} ms vs bare loop {bare * 1000:.1f} ms "
          f"-> overhead {100 * (traced / bare - 1):+.1f}%")
    if lm.device.type == "cpu" and not args.quick:
        imp, load = cold_load_seconds(args.model)
        print(f"# cold start from the cache in a fresh process: import {imp:.2f} s, load_model {load:.2f} s")
