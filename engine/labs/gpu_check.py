"""Everything the CUDA path must prove, in one run on an NVIDIA GPU: parity, CUDA-graph decode, the bench, traces.

`python -m engine.labs.gpu_check --out DIR` (scripts/gpu_check.sh calls it on the GPU machine):
  1. parity on CUDA: tiny GPT-2 and Llama (GQA) against transformers on the same GPU, prefill and every
     decode step; cached == no-cache greedy tokens;
  2. CUDA graphs: the same greedy tokens as eager decode (tiny models and a SmolLM2-shaped model);
  3. the bench in float32 and bfloat16: prefill 128/512/1024 tokens, decode step eager vs replayed from a
     CUDA graph at contexts 128 and 1024 (target: >= 3x decode speed-up from graphs at batch 1);
  4. two traces recorded with the same model into DIR (gpu-*.json; copy them to assets/traces/ to ship them),
     labelled with what they are.
The real SmolLM2 weights are used when this machine has them (its model cache); otherwise a model with
SmolLM2's exact shapes and random weights, which times the same but writes gibberish: every output says
which one ran. Writes DIR/gpu_check.txt (the report) and DIR/gpu_check.json (every number).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import engine
from engine.core.clock import now
from engine.core.generate import decode_loop, greedy, new_cache, prefill
from engine.core.trace_file import save_trace
from engine.labs.sweeps import prompt_ids_of_length
from engine.loading.model_store import CACHE_FOLDER, DEFAULT_MODEL, cache_root
from engine.loading.tiny import tiny_hf_model
from engine.techniques.cuda_graphs import GraphedDecoder, graphed_steps

REPORT: list[str] = []
NUMBERS: dict = {}


def say(line: str) -> None:
    print(line, flush=True)
    REPORT.append(line)


@torch.inference_mode()
def parity(arch: str, device: torch.device) -> float:
    """Largest |ours - transformers| over prefill and 6 decode steps of a tiny random model on `device`."""
    lm = engine.load_model(f"tiny-{arch}", device=device.type)
    hf = tiny_hf_model(arch).to(device)
    ids = torch.randint(0, lm.config.vocab_size, (2, 12), device=device)
    full = hf(ids).logits.float()  # (B, T, V)
    cache = new_cache(lm, 2, 12)
    worst = (prefill(lm, ids[:, :6], cache, all_logits=True) - full[:, :6]).abs().max().item()
    for t in range(6, 12):
        worst = max(worst, (engine.decode_step(lm, ids[:, t], cache) - full[:, t]).abs().max().item())
    same = engine.generate(lm, ids[0].tolist(), 10, ignore_eos=True).output_ids == \
        engine.generate_no_cache(lm, ids[0].tolist(), 10).output_ids
    say(f"parity {arch:5s} on {device}: max |logit diff| {worst:.2e} vs transformers; cached == no-cache tokens: {same}")
    return worst


@torch.inference_mode()
def graph_tokens_match(lm, n_tokens: int = 64) -> bool:
    ids = prompt_ids_of_length(lm, 64)
    eager = engine.generate(lm, ids, n_tokens, ignore_eos=True).output_ids
    graphed = engine.generate(lm, ids, n_tokens, ignore_eos=True, make_step=graphed_steps(lm)).output_ids
    return eager == graphed


@torch.inference_mode()
def time_prefill(lm, n: int, reps: int) -> float:
    ids = torch.tensor([prompt_ids_of_length(lm, n)], device=lm.device)
    times = []
    for _ in range(reps + 1):
        cache = new_cache(lm, 1, n + 1)
        start = now(lm.device)
        prefill(lm, ids, cache)
        times.append(now(lm.device) - start)
    return statistics.median(times[1:])


@torch.inference_mode()
def time_decode(lm, ctx: int, steps: int, graphs: bool) -> float:
    ids = torch.tensor([prompt_ids_of_length(lm, ctx)], device=lm.device)
    cache = new_cache(lm, 1, ctx + steps + 1)
    token = greedy(prefill(lm, ids, cache))
    step = GraphedDecoder(lm, cache).step if graphs else None
    seconds = decode_loop(lm, token, cache, steps, step=step)
    return statistics.median(seconds[2:])


def bench(lm, reps: int = 5, steps: int = 48) -> dict:
    rows = {}
    for n in (128, 512, 1024):
        rows[f"prefill_{n}_ms"] = 1e3 * time_prefill(lm, n, reps)
        say(f"  {lm.dtype_name:8s} prefill {n:5d} tokens: {rows[f'prefill_{n}_ms']:8.2f} ms")
    for ctx in (128, 1024):
        eager, graphed = time_decode(lm, ctx, steps, False), time_decode(lm, ctx, steps, True)
        rows[f"decode_{ctx}_eager_ms"], rows[f"decode_{ctx}_graph_ms"] = 1e3 * eager, 1e3 * graphed
        say(f"  {lm.dtype_name:8s} decode step @ {ctx:4d}: eager {1e3 * eager:7.3f} ms, CUDA graph {1e3 * graphed:7.3f} ms "
            f"-> {eager / graphed:.2f}x (target >= 3x)")
    return rows


def record(lm, out: Path, label: str) -> None:
    """Two traces for the recorded-runs feature: short prompt / long answer and long prompt / short answer."""
    for name, (n_prompt, n_out) in {"short-prompt-long-answer": (32, 256), "long-prompt-short-answer": (1024, 16)}.items():
        trace = engine.generate(lm, prompt_ids_of_length(lm, n_prompt), n_out, ignore_eos=True, capture_attention=True,
                                capture_layers=[lm.config.n_layers // 2])
        path = save_trace(trace, out / f"gpu-{name}.json", f"{label}: {n_prompt} prompt tokens -> {n_out} new, on a GPU")
        say(f"recorded {path.name}: {n_prompt} -> {trace.n_output} tokens, TTFT {trace.prefill_seconds * 1e3:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here; this check only makes sense on one")
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # parity in true float32
    say(f"# {time.strftime('%Y-%m-%d %H:%M')} | {torch.cuda.get_device_name()} | torch {torch.__version__} | "
        f"CUDA {torch.version.cuda}")
    NUMBERS["parity"] = {arch: parity(arch, device) for arch in ("gpt2", "llama")}
    NUMBERS["graphs_same_tokens_tiny"] = {arch: graph_tokens_match(engine.load_model(f"tiny-{arch}", device="cuda"))
                                          for arch in ("gpt2", "llama")}
    say(f"CUDA graphs, tiny models, same 64 greedy tokens as eager: {NUMBERS['graphs_same_tokens_tiny']}")
    real = (cache_root() / CACHE_FOLDER / "COMPLETE").is_file()
    name = DEFAULT_MODEL if real else "smollm2-random"
    label = "SmolLM2-135M-Instruct (real weights)" if real else "SmolLM2-135M shapes, RANDOM weights (timing only)"
    say(f"model for the bench and traces: {label}")
    for dtype in ("float32", "bfloat16"):
        lm = engine.load_model(name, device="cuda", dtype=dtype)
        same = graph_tokens_match(lm)
        say(f"{dtype}: CUDA-graph decode gives the same 64 greedy tokens as eager: {same}")
        NUMBERS[dtype] = dict(bench(lm), graphs_same_tokens=same)
        if dtype == "float32":
            record(lm, args.out, label)
        del lm
        torch.cuda.empty_cache()
    NUMBERS["model"] = label
    (args.out / "gpu_check.txt").write_text("\n".join(REPORT) + "\n")
    (args.out / "gpu_check.json").write_text(json.dumps(NUMBERS, indent=2))


if __name__ == "__main__":
    main()
