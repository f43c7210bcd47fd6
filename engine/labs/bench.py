"""`python -m engine bench`: our engine (fast and plain kernels) vs transformers and vLLM on the same
weights, and all of them vs this machine's floors.

Every ratio is measured side by side in one run, the engines taking turns, median of `--repeats`
rounds. Floors: decode can't beat (weight + KV bytes) / measured streaming-read bandwidth; prefill
can't beat FLOPs / measured matmul FLOP/s at the model's shapes. The vLLM column appears when
scripts/setup_vllm.sh has built its venv (engine/labs/bench_vllm.py says how it is timed), the llama.cpp column
when scripts/setup_llamacpp.sh has built its own (engine/labs/bench_llamacpp.py).
"""
from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from functools import partial

import torch

from engine.core.clock import now
from engine.core.generate import decode_loop, generate, greedy, new_cache, prefill
from engine.errors import EngineError
from engine.labs.hardware import measure_peaks, measure_read_bandwidth, step_bytes_reader
from engine.labs.sweeps import prompt_ids_of_length
from engine.loading.cache_folder import cache_root
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
    from engine.techniques.cuda_graphs import graphed_steps

    for ctx in contexts:
        ids = prompt_ids(lm, ctx)
        got = medians(reps, {"graphed": partial(time_decode_graphed, lm, ids, steps),
                             "eager": partial(time_decode_ours, lm, ids, steps)})
        graphed, eager = got["graphed"], got["eager"]
        print(f"{'CUDA graph decode @ ' + str(ctx):<26}  graphed {graphed * 1000:.2f} ms, eager {eager * 1000:.2f} ms "
              f"-> {eager / graphed:.1f}x")
    a = generate(lm, prompt_ids(lm, 64)[0].tolist(), 32, ignore_eos=True)
    b = generate(lm, prompt_ids(lm, 64)[0].tolist(), 32, ignore_eos=True, make_step=graphed_steps(lm))
    print(f"# CUDA graphs: same 32 greedy tokens as eager: {a.output_ids == b.output_ids}")


def cold_load_seconds(model: str, dtype: str = "float32") -> tuple[float, float]:
    """import + load_model in a fresh process, from the cache, in the bench's dtype: (import seconds, load seconds).
    `import engine` loads its contract names on first use, so the import is timed up to `engine.load_model` (torch,
    transformers, the engine)."""
    code = ("import time; t=time.perf_counter(); import engine; engine.load_model; i=time.perf_counter()-t; "
            f"lm=engine.load_model({model!r}, device='cpu', dtype={dtype!r}); print(i, lm.load_seconds)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imp, load = out.stdout.split()[-2:]
    return float(imp), float(load)


COLUMNS = ("fast", "plain", "hf", "vLLM", "llama.cpp")
PEERS = ("hf", "vLLM", "llama.cpp")  # fast's ratio to each


def row(label: str, ms: dict[str, float | None], floor: float | None) -> str:
    """One line: each engine's time, then fast's ratio to transformers, to vLLM and to the floor."""
    fast = ms["fast"]

    def num(v: float | None, scale: float = 1000.0, width: int = 9, digits: int = 1) -> str:
        return f"{v * scale:{width}.{digits}f}" if v else f"{'-':>{width}}"

    parts = [f"{label:<26}"] + [num(ms.get(c), width=max(9, len(c) + 3)) for c in COLUMNS]
    parts += [num(fast / ms[c] if ms.get(c) else None, 1.0, max(8, len(c) + 5), 2) for c in PEERS]
    parts += [num(floor), num(fast / floor if floor else None, 1.0, 8, 2)]
    return "  ".join(parts)


def header() -> str:
    names = [f"{c + ' ms':>9}" for c in COLUMNS] + [f"{'fast/' + c:>8}" for c in PEERS] + [f"{'floor ms':>9}",
                                                                                          f"{'fast/fl':>8}"]
    return "  ".join([f"{'measurement':<26}"] + names)


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of n timers, one per round, in which each timer follows every other about equally often (a Williams
    design: n orders for even n, 2n for odd). A plain rotation keeps every timer's successor: the same timer would
    always run right after vLLM, whose threads spin for a while after a request, and take all of that slowdown."""
    base = [0] + [k for i in range(1, n // 2 + 1) for k in (i, n - i)][: n - 1]  # 0, 1, n-1, 2, n-2, ...
    rows = [[(b + r) % n for b in base] for r in range(n)]
    if n % 2 == 0:
        return rows
    return [order for row in rows for order in (row, row[::-1])]  # odd n: each row and its mirror


def medians(repeats: int, timers: dict) -> dict[str, float]:
    """Each timer once per round, `repeats` rounds, in balanced orders (none always runs right after the same
    one); the median seconds of each."""
    got: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    orders = balanced_orders(len(names))
    for r in range(repeats):
        for i in orders[r % len(orders)]:
            got[names[i]].append(timers[names[i]]())
    return {name: statistics.median(v) for name, v in got.items()}


def start_vllm(args, lm):
    """A running VllmPeer, or None with the reason printed (no venv, another model, it would not start)."""
    from engine.labs import bench_vllm

    if args.no_vllm or lm.device.type != "cpu":
        return None
    why = bench_vllm.available(args.model)
    if why is None:
        try:
            return bench_vllm.VllmPeer(torch.get_num_threads(), lm.dtype_name)
        except EngineError as exc:
            why = str(exc)
    print(f"# no vLLM column: {why}")
    return None


def start_llamacpp(args, lm):
    """A running LlamaCppPeer on the GGUF at our dtype's precision (or --llamacpp-type), or None with the reason
    printed (no venv or file, another model, it would not start)."""
    from engine.labs import bench_llamacpp

    if getattr(args, "no_llamacpp", False) or lm.device.type != "cpu":
        return None
    gguf = getattr(args, "llamacpp_type", None) or bench_llamacpp.SAME_PRECISION[lm.dtype_name]
    why = bench_llamacpp.available(args.model, gguf)
    if why is None:
        try:
            peer = bench_llamacpp.LlamaCppPeer(torch.get_num_threads(), gguf)
            print(f"# {bench_llamacpp.describe(peer.info)}")
            return peer
        except EngineError as exc:
            why = str(exc)
    print(f"# no llama.cpp column: {why}")
    return None


def run_bench(args) -> None:
    if args.repeats < 1:
        raise EngineError(f"--repeats must be at least 1 (got {args.repeats})")
    from engine.techniques.kernels import with_kernels

    if getattr(args, "remeasure_kernels", False):  # time the candidate kernels again and replace the cached choice
        plain = load_model(args.model, args.device, args.dtype, kernels="plain")
        fast = with_kernels(plain, "fast", cache_root(), remeasure=True)
    else:
        fast = load_model(args.model, args.device, args.dtype, kernels="fast")
        plain = with_kernels(fast, "plain")
    print(f"# {fast.name} | {fast.device} {fast.dtype_name} | torch {torch.__version__} | {torch.get_num_threads()} "
          f"threads | {time.strftime('%Y-%m-%d')} | fast = {fast.kernels}")
    if fast.kernel_why:
        print(f"# kernels chosen by measurement: {fast.kernel_why}")
    hf = hf_reference(fast)
    peaks = measure_peaks(fast.device, fast.dtype, fast.config)
    if fast.dtype != torch.float32:  # the fast path may widen to float32 GEMMs: the ceiling is the better of the two
        wide = measure_peaks(fast.device, torch.float32, fast.config)
        print(f"# matmul {peaks.matmul_flops_per_s / 1e9:.0f} GFLOP/s in {fast.dtype_name}, "
              f"{wide.matmul_flops_per_s / 1e9:.0f} in float32: the prefill floor uses the higher")
        peaks = max(peaks, wide, key=lambda p: p.matmul_flops_per_s)
    read = measure_read_bandwidth(fast.device)
    print(f"# measured here: streaming read {read / 1e9:.1f} GB/s (x.sum() of 256 MB), copy "
          f"{peaks.copy_bytes_per_s / 1e9:.1f} GB/s (read+write), matmul {peaks.matmul_flops_per_s / 1e9:.0f} GFLOP/s "
          f"at ({fast.config.d_model}x{fast.config.d_ff}) shapes")
    print(f"# weights {fast.weight_bytes / 1e6:.0f} MB. Floors: prefill = FLOPs / matmul FLOP/s; decode = bytes "
          "read per step (weights + KV) / streaming-read bandwidth, the read timed in the same rounds as the steps. "
          "Ratios < 1.00: fast is quicker.")
    vllm = start_vllm(args, fast)
    llamacpp = start_llamacpp(args, fast)
    table: dict = {}  # label -> seconds per engine and the floor, for --json
    try:
        _rows(args, fast, plain, hf, vllm, peaks, table, llamacpp)
    finally:
        for peer in (vllm, llamacpp):
            if peer is not None:
                peer.stop()
    if getattr(args, "json", None):
        write_json(args.json, fast, read, peaks, table)


def write_json(path: str, fast, read: float, peaks, table: dict) -> None:
    """The bench's numbers as JSON (benchmarks/cpu_check.py reads them): every row's seconds per engine and its floor,
    the machine's measured read and matmul rates, and which kernels fast meant."""
    from engine.techniques.measured_cache import cpu_identity

    record = dict(model=fast.name, dtype=fast.dtype_name, device=str(fast.device), torch=torch.__version__,
                  threads=torch.get_num_threads(), date=time.strftime("%Y-%m-%d %H:%M"), cpu=cpu_identity()[0],
                  capability=torch.backends.cpu.get_cpu_capability(), vector_flags=vector_flags(),
                  python=platform.python_version(), kernels=fast.kernels, kernel_why=fast.kernel_why,
                  read_bytes_per_s=read, matmul_flops_per_s=peaks.matmul_flops_per_s, rows=table)
    with open(path, "w") as f:
        json.dump(record, f, indent=1)


def vector_flags() -> list[str]:
    """The CPU's vector instruction sets (avx2, avx512_bf16, amx_tile, ...); [] where the flags are unknown."""
    from engine.techniques.measured_cache import cpu_flags

    return [f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "f16c"))]


def _rows(args, fast, plain, hf, vllm, peaks, table: dict, llamacpp=None) -> None:
    print(header())
    sizes = (32, 128) if args.quick else (128, 512, 1024)
    contexts = (32, 128) if args.quick else (128, 1024)
    reps, steps = args.repeats, (4 if args.quick else 16)
    peers = {name: peer for name, peer in (("vLLM", vllm), ("llama.cpp", llamacpp)) if peer}  # the same two calls each
    for n in sizes:
        ids = prompt_ids(fast, n)
        timers = {"fast": partial(time_prefill_ours, fast, ids), "plain": partial(time_prefill_ours, plain, ids),
                  "hf": partial(time_prefill_hf, hf, ids)}
        timers.update({name: partial(peer.ttft, ids[0].tolist()) for name, peer in peers.items()})
        floor = prefill_flops(fast.config, n).total / peaks.matmul_flops_per_s
        ms = medians(reps, timers)
        table[f"prefill {n}"] = dict(ms, floor=floor)
        print(row(f"prefill {n} tokens", ms, floor), flush=True)
    for ctx in contexts:
        ids = prompt_ids(fast, ctx)
        timers = {"fast": partial(time_decode_ours, fast, ids, steps), "plain": partial(time_decode_ours, plain, ids, steps),
                  "hf": partial(time_decode_hf, hf, ids, steps)}
        timers.update({name: partial(peer.decode_step, ids[0].tolist(), steps) for name, peer in peers.items()})
        dtype_bytes = fast.dtype.itemsize
        step_bytes = decode_step_bytes(fast.config, ctx + 1, 1, dtype_bytes, dtype_bytes)
        # the floor's streaming read timed in the same rounds as the steps: a busy machine slows both alike
        timers["floor"] = lambda n=step_bytes: n / measure_read_bandwidth(fast.device, repeats=3)
        kv_bytes = int(step_bytes - fast.config.weight_bytes(dtype_bytes))
        reader = step_bytes_reader(plain.model, kv_bytes, fast.device)
        timers["read"] = reader  # the step's own bytes in its own pieces, read by torch, in the same rounds too
        ms = medians(reps, timers)
        floor, read = ms.pop("floor"), ms.pop("read")
        table[f"decode {ctx}"] = dict(ms, floor=floor, read=read)
        print(row(f"decode step @ context {ctx}", ms, floor), flush=True)
        print(f"#   the same bytes ({reader.nbytes / 1e6:,.1f} MB) read by torch in the step's own pieces (one sum() per "
              f"matrix, then the KV cache), same rounds: {read * 1000:.1f} ms; fast / that read: {ms['fast'] / read:.2f}",
              flush=True)
    if fast.device.type == "cuda":
        bench_cuda_graphs(fast, contexts, steps, reps)
    ids = prompt_ids(fast, 64)[0].tolist()
    new = 8 if args.quick else 32

    def e2e(lm) -> float:
        return generate(lm, ids, new, ignore_eos=True).total_seconds

    def hf_e2e() -> float:
        start = now(fast.device)
        hf.generate(torch.tensor([ids], device=fast.device), max_new_tokens=new, min_new_tokens=new, do_sample=False)
        return now(fast.device) - start

    ms = medians(reps, {"fast": partial(e2e, fast), "plain": partial(e2e, plain), "hf": hf_e2e})
    table[f"generate 64 + {new}"] = ms
    print(row(f"generate 64 + {new} tokens", ms, None))
    a, b = generate(fast, ids, new, ignore_eos=True).output_ids, generate(plain, ids, new, ignore_eos=True).output_ids
    agree = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    note = "" if a == b else f" (the first {agree} agree: {fast.dtype_name} rounds differently in each kernel)"
    print(f"# fast and plain kernels give the same {new} greedy tokens: {a == b}{note}")
    table["same greedy tokens"] = dict(same=a == b, agree=agree, tokens=new)
    if llamacpp:
        from engine.labs.bench_llamacpp import compare_greedy

        got = compare_greedy(fast, llamacpp, ids, new)
        where = got["first_difference"]
        differ = "" if where is None else " (they differ from the first)" if where == 0 else f" (the first {where} agree)"
        print(f"# fast and llama.cpp ({llamacpp.gguf_type}) give the same {new} greedy tokens: {where is None}{differ}; "
              f"first step's logits apart by {got['logit_gap']:.1e} of their largest")
        table["same greedy tokens as llama.cpp"] = dict(same=where is None, agree=new if where is None else where,
                                                         tokens=new, logit_gap=got["logit_gap"], gguf=llamacpp.gguf_type)
    got = medians(reps + 2, {"traced": partial(e2e, fast), "bare": lambda: bare_loop_seconds(fast, ids, new)})
    print(f"# Trace bookkeeping: generate() {got['traced'] * 1000:.1f} ms vs bare loop {got['bare'] * 1000:.1f} ms "
          f"-> overhead {100 * (got['traced'] / got['bare'] - 1):+.1f}%")
    if fast.device.type == "cpu" and not args.quick:
        imp, load = cold_load_seconds(args.model, fast.dtype_name)
        print(f"# cold start from the cache in a fresh process: import {imp:.2f} s, load_model {load:.2f} s "
              "(the fast kernels' cached choice read and prepacked)")
