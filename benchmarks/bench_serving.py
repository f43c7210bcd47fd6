"""Side by side on this machine: our engine through `python -m engine serve` vs vLLM's CPU build, same weights.

Both serve SmolLM2-135M-Instruct in float32 with prefix caching off, with the same number of threads
(--threads N: our torch threads, vLLM's VLLM_CPU_OMP_THREADS_BIND=0-(N-1); default every core), measured with
`engine measure`'s client (engine/serving/client/server_benchmark.py): TTFT at 128/512/1024 prompt tokens and the
gaps between tokens (ITL), one request at a time, the servers taking turns so that the machine's
noise falls on both alike. Prints a Markdown table with medians and ours/vLLM ratios (below 1.00:
ours is faster), the load average before and after, and which vLLM mode ran.

    .venv/bin/python -m benchmarks.bench_serving [--rounds 5] [--output-tokens 32] [--vllm-mode eager|compiled]
    .venv/bin/python -m benchmarks.bench_serving --servers ours,ours-process --concurrency 4 --mode batch
The second form compares the scheduler in a thread of the HTTP server with the scheduler in a child
process (engine/serving/api_server/__init__.py's WORKER_DEFAULT was chosen this way).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from benchmarks._servers import started
from engine.serving.client.server_benchmark import Plan, run


def start(kind: str, port: int, args):
    """One server under test, started in its own process group (a `with`: always stopped)."""
    env = dict(os.environ)
    if kind == "vllm":
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}" if args.threads > 1 else "0")
        if args.vllm_mode == "compiled":
            env["TWO_BENDS_VLLM_COMPILE"] = "1"
        cmd = ["bash", "scripts/start_vllm.sh", str(port), "--foreground"]
    else:
        cmd = [sys.executable, "-m", "engine", "serve", "--port", str(port), "--mode", args.mode,
               "--threads", str(args.threads), "--worker", "process" if kind == "ours-process" else "thread"]
    return started(kind, cmd, port, Path(f"/tmp/bench_serving_{kind}_{port}.log"), args.start_timeout, env)


def measure(url: str, prompt_tokens: int, args) -> tuple[list[float], list[float], dict]:
    """(TTFTs, ITLs, the server's own means) of `args.requests` requests."""
    records, facts = run(Plan(url, prompt_tokens, args.output_tokens, requests=args.requests,
                              concurrency=args.concurrency, warmup=0))
    ttft = [r["prefill_seconds"] for r in records]
    itl = [s["seconds"] for r in records for s in r["steps"]]
    server_side = {k: v["mean_seconds"] for k, v in (facts["server_metrics"] or {}).items() if isinstance(v, dict)}
    return ttft, itl, server_side


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", default="ours,vllm", help="comma-separated: ours (scheduler in a thread), ours-process, vllm")
    p.add_argument("--prompt-tokens", default="128,512,1024")
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5, help="turns each server takes per prompt length")
    p.add_argument("--requests", type=int, default=1, help="requests per turn")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--mode", default="queue", choices=["queue", "batch"], help="our scheduler's mode")
    p.add_argument("--vllm-mode", default="eager", choices=["eager", "compiled"],
                   help="eager: --enforce-eager (starts in ~1 min); compiled: vLLM's default torch.compile (4-6 min)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="cores for each engine: our torch threads, vLLM's VLLM_CPU_OMP_THREADS_BIND=0-(N-1) (default: all)")
    p.add_argument("--settle", type=float, default=2.5, help="seconds of rest after each turn (default 2.5: for ~2 s "
                   "after a vLLM request every engine on the machine ran 2-3x slower)")
    p.add_argument("--start-timeout", type=float, default=900)
    p.add_argument("--base-port", type=int, default=18600)
    args = p.parse_args()
    kinds = [k.strip() for k in args.servers.split(",")]
    lengths = [int(n) for n in args.prompt_tokens.split(",")]
    load_before = os.getloadavg()
    servers: list[tuple[str, str]] = []  # (kind, URL)
    with contextlib.ExitStack() as running:  # every server stopped, however this ends
        for i, kind in enumerate(kinds):
            began, port = time.monotonic(), args.base_port + i
            running.enter_context(start(kind, port, args))
            servers.append((kind, f"http://127.0.0.1:{port}"))
            print(f"# {kind} up after {time.monotonic() - began:.0f} s at {servers[-1][1]}", flush=True)
        for _, url in servers:  # warm-up: first requests pay one-time costs on every engine
            measure(url, max(lengths), argparse.Namespace(**{**vars(args), "requests": 1}))
        got = {(kind, n): ([], [], []) for kind, _ in servers for n in lengths}
        for r in range(args.rounds):
            for n in lengths:
                for kind, url in (servers if r % 2 == 0 else servers[::-1]):
                    ttft, itl, server_side = measure(url, n, args)
                    time.sleep(args.settle)  # untimed: vLLM's threads keep spinning ~2 s after a request
                    got[(kind, n)][0].extend(ttft)
                    got[(kind, n)][1].extend(itl)
                    got[(kind, n)][2].append(server_side)
            print(f"# round {r + 1}/{args.rounds} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    report(kinds, lengths, got, args, load_before, os.getloadavg())


def report(kinds, lengths, got, args, load_before, load_after) -> None:
    ms = lambda v: statistics.median(v) * 1000  # noqa: E731
    base, other = kinds[0], kinds[1] if len(kinds) > 1 else None
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; vLLM mode: {args.vllm_mode}; "
          f"{args.threads} thread(s) each (ours: torch threads; vLLM: VLLM_CPU_OMP_THREADS_BIND="
          f"{os.environ.get('VLLM_CPU_OMP_THREADS_BIND', f'0-{args.threads - 1}' if args.threads > 1 else '0')}); "
          f"our scheduler: {args.mode}; {args.rounds} rounds x {args.requests} request(s), concurrency {args.concurrency}, "
          f"{args.output_tokens} output tokens, medians\n")
    head = "| prompt tokens | " + " | ".join(f"{k} TTFT ms | {k} ITL ms" for k in kinds)
    head += f" | TTFT {base}/{other} | ITL {base}/{other} |" if other else " |"
    print(head)
    print("|" + "---:|" * (1 + 2 * len(kinds) + (2 if other else 0)))
    for n in lengths:
        cells = [f"{ms(got[(k, n)][0]):.1f} | {ms(got[(k, n)][1]):.1f}" for k in kinds]
        line = f"| {n} | " + " | ".join(cells)
        if other:
            line += (f" | {ms(got[(base, n)][0]) / ms(got[(other, n)][0]):.2f}"
                     f" | {ms(got[(base, n)][1]) / ms(got[(other, n)][1]):.2f} |")
        print(line + ("" if other else " |"))
    print("\nserver-side means from /metrics (ms): " + "; ".join(
        f"{k} @{n}: TTFT {statistics.mean(d['ttft'] for d in got[(k, n)][2]) * 1000:.1f}, "
        f"ITL {statistics.mean(d['itl'] for d in got[(k, n)][2]) * 1000:.1f}"
        for k in kinds for n in lengths if all('ttft' in d and 'itl' in d for d in got[(k, n)][2])))


if __name__ == "__main__":
    main()
