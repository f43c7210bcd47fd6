"""Everything the CUDA path must prove, in one run on an NVIDIA GPU, as checks that pass or fail: parity, CUDA graphs.

`python -m engine.labs.gpu_check --out DIR` (scripts/gpu_check.sh calls it on the GPU machine):
  1. parity on CUDA: tiny GPT-2 and Llama (GQA) against transformers on the same GPU, prefill and every
     decode step (max |logit diff| <= PARITY_TOL in float32, TF32 off); cached == no-cache greedy tokens;
  2. CUDA graphs: the same greedy tokens as eager decode (tiny models and a SmolLM2-shaped model, both dtypes);
  3. the bench in float32 and bfloat16: prefill 128/512/1024 tokens, decode step eager vs replayed from a
     CUDA graph at contexts 128 and 1024 (a target, >= 3x from graphs at batch 1: reported, never a failure);
  4. two traces recorded with the same model into DIR (gpu-*.json; copy them to assets/traces/ to ship them),
     each read back through engine.core.trace_file's checks.
Each result is written and flushed the moment its check finishes (DIR/gpu_check.txt, DIR/gpu_check.jsonl), so a
crash part-way keeps what was done; a check that raises fails alone. Exit status 0 only when every check passed (1:
some failed; 2: no CUDA GPU). The real SmolLM2 weights where cached here, else its shapes with random weights.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

import engine
from engine.core.generate import decode_loop, greedy, new_cache, prefill
from engine.core.trace_file import load_trace, save_trace
from engine.labs.bench import prompt_ids, time_prefill_ours
from engine.labs.sweeps import prompt_ids_of_length
from engine.loading.model_store import DEFAULT_MODEL, bundled_converted
from engine.loading.tiny import tiny_hf_model
from engine.techniques.cuda_graphs import GraphedDecoder, graphed_steps

PARITY_TOL = 1e-3  # float32 with TF32 off: ours and transformers agree to ~1e-5 on the tiny models
GRAPH_TARGET = 3.0  # decode speed-up from CUDA graphs at batch 1 (a target: reported, not a failed check)


class Checks:
    """Runs checks one by one and writes each result as it finishes; `failed` counts the ones that did not pass."""

    def __init__(self, out: Path):
        self.out, self.failed, self.passed, self.numbers = out, 0, 0, {}
        out.mkdir(parents=True, exist_ok=True)
        for name in ("gpu_check.txt", "gpu_check.jsonl"):
            (out / name).write_text("")

    def write(self, line: str, record: dict | None = None) -> None:
        """One line on the screen and in gpu_check.txt (and a JSON record), on disk before the next check starts."""
        print(line, flush=True)
        for name, text in (("gpu_check.txt", line), ("gpu_check.jsonl", json.dumps(record) if record else None)):
            if text is None:
                continue
            with open(self.out / name, "a") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())

    def check(self, name: str, run, *args) -> None:
        """`run(*args)` returns (passed, detail, numbers): passed True/False, or None for a measurement only."""
        start = time.perf_counter()
        try:
            passed, detail, numbers = run(*args)
        except Exception as exc:  # a crash is a failed check with its reason; the next check still runs
            passed, detail, numbers = False, f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", {}
        seconds = time.perf_counter() - start
        verdict = {True: "PASS", False: "FAIL", None: "INFO"}[passed]
        self.failed += passed is False
        self.passed += passed is True
        self.numbers[name] = numbers
        self.write(f"{verdict} {name}: {detail} ({seconds:.1f} s)",
                   dict(check=name, verdict=verdict, detail=detail, seconds=round(seconds, 3), numbers=numbers))

    def finish(self) -> int:
        """The summary line and gpu_check.json; the exit status (0 only when nothing failed)."""
        self.write(f"# {self.passed} checks passed, {self.failed} failed")
        (self.out / "gpu_check.json").write_text(json.dumps(self.numbers, indent=2))
        return 1 if self.failed else 0


@torch.inference_mode()
def parity(arch: str, device: torch.device):
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
    return (worst <= PARITY_TOL and same, f"{arch} on {device}: max |logit diff| {worst:.2e} vs transformers "
            f"(at most {PARITY_TOL:.0e}); cached == no-cache tokens: {same}", dict(max_logit_diff=worst, cached_same=same))


@torch.inference_mode()
def graph_tokens_match(lm, n_tokens: int = 64):
    ids = prompt_ids_of_length(lm, 64)
    eager = engine.generate(lm, ids, n_tokens, ignore_eos=True).output_ids
    graphed = engine.generate(lm, ids, n_tokens, ignore_eos=True, make_step=graphed_steps(lm)).output_ids
    first = next((i for i, (a, b) in enumerate(zip(eager, graphed)) if a != b), None)
    same = eager == graphed
    where = "" if same else f" (first differs at token {first if first is not None else min(len(eager), len(graphed))})"
    return same, f"{lm.name} {lm.dtype_name}: CUDA-graph decode gives the same {n_tokens} greedy tokens as eager: " \
                 f"{same}{where}", dict(same_tokens=same)


def time_prefill(lm, n: int, reps: int) -> float:
    """The median of `reps` prefills of `n` tokens, after one untimed warm-up (timed as the bench times them)."""
    ids = prompt_ids(lm, n)
    times = [time_prefill_ours(lm, ids) for _ in range(reps + 1)]
    return statistics.median(times[1:])


@torch.inference_mode()
def time_decode(lm, ctx: int, steps: int, graphs: bool) -> float:
    ids = prompt_ids(lm, ctx)
    cache = new_cache(lm, 1, ctx + steps + 1)
    token = greedy(prefill(lm, ids, cache))
    step = GraphedDecoder(lm, cache).step if graphs else None
    seconds = decode_loop(lm, token, cache, steps, step=step)
    return statistics.median(seconds[2:])


def bench(lm, reps: int = 5, steps: int = 48):
    """Prefill 128/512/1024 and decode eager vs CUDA graph: numbers, and whether the graphs' target was met."""
    rows, parts = {}, []
    for n in (128, 512, 1024):
        rows[f"prefill_{n}_ms"] = 1e3 * time_prefill(lm, n, reps)
        parts.append(f"prefill {n} {rows[f'prefill_{n}_ms']:.2f} ms")
    for ctx in (128, 1024):
        eager, graphed = time_decode(lm, ctx, steps, False), time_decode(lm, ctx, steps, True)
        rows[f"decode_{ctx}_eager_ms"], rows[f"decode_{ctx}_graph_ms"] = 1e3 * eager, 1e3 * graphed
        met = "met" if eager / graphed >= GRAPH_TARGET else "MISSED"
        parts.append(f"decode @ {ctx}: eager {1e3 * eager:.3f} ms, CUDA graph {1e3 * graphed:.3f} ms -> "
                     f"{eager / graphed:.2f}x (target >= {GRAPH_TARGET:.0f}x {met})")
    return None, f"{lm.dtype_name}: " + "; ".join(parts), rows


def record(lm, out: Path, label: str, name: str, n_prompt: int, n_out: int):
    """A trace for the recorded-runs feature, saved and read back through the file checks."""
    trace = engine.generate(lm, prompt_ids_of_length(lm, n_prompt), n_out, ignore_eos=True, capture_attention=True,
                            capture_layers=[lm.config.n_layers // 2])
    path = save_trace(trace, out / f"gpu-{name}.json", f"{label}: {n_prompt} prompt tokens -> {n_out} new, on a GPU")
    back = load_trace(path)
    ok = back.output_ids == trace.output_ids and back.n_output == n_out
    return ok, (f"{path.name}: {n_prompt} -> {trace.n_output} tokens, TTFT {trace.prefill_seconds * 1e3:.2f} ms, "
                f"TPOT {trace.decode_seconds / max(len(trace.steps), 1) * 1e3:.3f} ms; reads back: {ok}"), \
        dict(ttft_ms=trace.prefill_seconds * 1e3, tpot_ms=trace.decode_seconds / max(len(trace.steps), 1) * 1e3)


def load(name: str, dtype: str, holder: dict):
    holder["lm"] = engine.load_model(name, device="cuda", dtype=dtype)
    return True, f"{name} in {dtype} on {torch.cuda.get_device_name()}", {}


def run_all(checks: Checks, device: torch.device) -> None:
    """Every check in order, cheapest and most telling first (a timeout part-way keeps the parity verdicts)."""
    for arch in ("gpt2", "llama"):
        checks.check(f"parity-{arch}", parity, arch, device)
        checks.check(f"graphs-tiny-{arch}", lambda a: graph_tokens_match(engine.load_model(f"tiny-{a}", device="cuda")),
                     arch)
    real = bundled_converted()
    name = DEFAULT_MODEL if real else "smollm2-random"
    label = "SmolLM2-135M-Instruct (real weights)" if real else "SmolLM2-135M shapes, RANDOM weights (timing only)"
    checks.write(f"# model for the bench and traces: {label}", dict(model=label))
    for dtype in ("float32", "bfloat16"):
        holder: dict = {}
        checks.check(f"load-{dtype}", load, name, dtype, holder)
        lm = holder.pop("lm", None)
        if lm is None:
            continue
        checks.check(f"graphs-{dtype}", graph_tokens_match, lm)
        checks.check(f"bench-{dtype}", bench, lm)
        if dtype == "float32":
            for trace_name, (n_prompt, n_out) in {"short-prompt-long-answer": (32, 256),
                                                  "long-prompt-short-answer": (1024, 16)}.items():
                checks.check(f"trace-{trace_name}", record, lm, checks.out, label, trace_name, n_prompt, n_out)
        del lm
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    checks = Checks(args.out)
    if not torch.cuda.is_available():
        checks.write("FAIL cuda: no CUDA GPU here (or this torch is a CPU build); this check only makes sense on one",
                     dict(check="cuda", verdict="FAIL"))
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # parity in true float32
    checks.write(f"# {time.strftime('%Y-%m-%d %H:%M')} | {torch.cuda.get_device_name()} | torch {torch.__version__} | "
                 f"CUDA {torch.version.cuda}")
    run_all(checks, torch.device("cuda"))
    return checks.finish()


if __name__ == "__main__":
    raise SystemExit(main())
