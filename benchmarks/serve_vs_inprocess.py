"""The same request in process and behind HTTP: what does `python -m engine serve` add to TTFT and ITL?

In process: `python -m engine generate --prompt-tokens N --max-new-tokens M --json` (a fresh process each round,
its warm-up excluded as always). Behind HTTP: `python -m engine serve` (queue mode, nothing else running) timed by
`python -m engine measure --prompt-tokens N --max-new-tokens M --concurrency 1` from another process, as a client
would. The rounds alternate, so the machine's noise falls on both alike; printed side by side with the ratios
(the target: both within 1.1x). Run it under `flock /tmp/tb/bench.lock` on a shared machine.

    .venv/bin/python -m benchmarks.serve_vs_inprocess [--rounds 3] [--requests 5] [--servers thread process]
A server may carry environment variables for its process (and its worker's): `--servers thread process:GOMP_SPINCOUNT=0`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._servers import serve

ROOT = Path(__file__).resolve().parent.parent


def engine_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


def in_process(args) -> tuple[float, list[float]]:
    """(TTFT, decode step seconds) of one `engine generate` run."""
    from engine.core.prompting import SWEEP_TEXT

    out = subprocess.run(engine_cmd("generate", "--prompt", SWEEP_TEXT, "--prompt-tokens", str(args.prompt_tokens),
                                    "--max-new-tokens", str(args.max_new_tokens), "--ignore-eos", "--json",
                                    "--threads", str(args.threads), "--kernels", args.kernels),
                         cwd=ROOT, capture_output=True, text=True, check=True)
    trace = json.loads(out.stdout)
    return trace["prefill_seconds"], [s["seconds"] for s in trace["steps"]]


def start(variant: str, port: int, args):
    """`python -m engine serve` with one worker choice and its :NAME=VALUE environment settings."""
    worker, *settings = variant.split(":")
    env = dict(os.environ, **dict(kv.split("=", 1) for kv in settings))
    return serve(["--port", str(port), "--worker", worker, "--threads", str(args.threads), "--kernels", args.kernels],
                 Path(f"/tmp/serve_vs_inprocess_{worker}_{port}.log"), env=env)


def measure(port: int, args) -> tuple[list[float], list[float]]:
    """(TTFT per request, every ITL) from `engine measure --json`."""
    out = subprocess.run(engine_cmd("measure", "--url", f"http://127.0.0.1:{port}", "--prompt-tokens",
                                    str(args.prompt_tokens), "--max-new-tokens", str(args.max_new_tokens),
                                    "--concurrency", "1", "--requests", str(args.requests), "--json"),
                         cwd=ROOT, capture_output=True, text=True, check=True)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [r["prefill_seconds"] for r in recs], [s["seconds"] for r in recs for s in r["steps"]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=5, help="measured HTTP requests per round (after one warm-up)")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=0, help="torch threads, both sides (0 = every core)")
    p.add_argument("--kernels", default="fast", choices=["fast", "plain"])
    p.add_argument("--servers", nargs="+", default=["thread", "process"],
                   help="worker choices to serve with, each optionally with :NAME=VALUE environment settings")
    p.add_argument("--port", type=int, default=8731)
    p.add_argument("--json", metavar="PATH", help="also write the medians as JSON (seconds)")
    args = p.parse_args()
    workers = args.servers
    ttft: dict[str, list[float]] = {"in process": [], **{w: [] for w in workers}}
    itl: dict[str, list[float]] = {k: [] for k in ttft}
    load_before = os.getloadavg()
    for rnd in range(args.rounds):
        first, steps = in_process(args)
        ttft["in process"].append(first)
        itl["in process"] += steps
        for i, worker in enumerate(workers):  # one server at a time: an idle one must not stand beside the other
            with start(worker, args.port + i, args):
                firsts, gaps = measure(args.port + i, args)
            ttft[worker] += firsts
            itl[worker] += gaps
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    base_ttft, base_itl = statistics.median(ttft["in process"]), statistics.median(itl["in process"])
    print(f"\n{args.prompt_tokens}-token prompt, {args.max_new_tokens} new tokens, kernels {args.kernels}, "
          f"threads {args.threads or 'every core'}, {args.rounds} rounds; load average before "
          f"{load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}\n")
    print("| where | TTFT ms (median) | ITL ms (median) | ITL p90 ms | TTFT / in process | ITL / in process |")
    print("|---|---:|---:|---:|---:|---:|")
    medians = {}
    for name in ttft:
        t, gaps = statistics.median(ttft[name]), sorted(itl[name])
        medians[name] = dict(ttft=t, itl=statistics.median(gaps))
        p90 = gaps[int(0.9 * (len(gaps) - 1))]
        label = name if name == "in process" else f"engine serve --worker {name}"
        print(f"| {label} | {t * 1e3:.1f} | {statistics.median(gaps) * 1e3:.1f} | {p90 * 1e3:.1f} | "
              f"{t / base_ttft:.2f}x | {statistics.median(gaps) / base_itl:.2f}x |")
    if args.json:  # benchmarks/cpu_check.py reads it
        with open(args.json, "w") as f:
            json.dump(dict(prompt_tokens=args.prompt_tokens, max_new_tokens=args.max_new_tokens, rounds=args.rounds,
                           medians=medians), f, indent=1)


if __name__ == "__main__":
    main()
