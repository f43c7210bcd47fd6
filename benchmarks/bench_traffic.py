"""The same traffic against our engine (`engine serve`: queue, batch, chunked, disaggregated) and vLLM's CPU build.

One workload, one seed: every server gets the very same arrival sequence (engine/perfmodel/workload.py), sent
open-loop by `engine measure`'s traffic mode (engine/serving/client/traffic_benchmark.py). The servers run one
after another, each alone, with the same model threads (--threads, default 1: our torch threads, vLLM's
VLLM_CPU_OMP_THREADS_BIND). Prints a Markdown table: p50/p99 TTFT and ITL, throughput and goodput per server.

    .venv/bin/python -m benchmarks.bench_traffic [--workload summarisation] [--request-rate 0.5] [--requests 12]
        [--servers ours-queue,ours-batch,ours-chunked,ours-disaggregated,vllm-chunked,vllm-unchunked]
        [--slo-ttft-ms 2000] [--slo-tpot-ms 200]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks._servers import started
from engine.perfmodel.goodput import SLO
from engine.perfmodel.workload import shaped
from engine.serving.client.traffic_benchmark import TrafficPlan, run_traffic, traffic_summary

CHUNK = 256  # tokens per step with chunked prefill: ours (--max-num-batched-tokens) and vLLM's (start_vllm.sh)
SERVERS = {"ours-queue": "our engine, queue", "ours-batch": "our engine, continuous batching",
           "ours-chunked": f"our engine, + chunked prefill ({CHUNK})",
           "ours-disaggregated": "our engine, disaggregated (2 workers x the threads)",
           "vllm-chunked": "vLLM CPU, chunked prefill on", "vllm-unchunked": "vLLM CPU, chunked prefill off"}


def start(kind: str, port: int, args):
    """One server, ours or vLLM (a `with`: stopped on leaving)."""
    env = dict(os.environ)
    if kind.startswith("vllm"):
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}" if args.threads > 1 else "0")
        cmd = ["bash", "scripts/start_vllm.sh", str(port), "--foreground", "--chunked-prefill",
               "on" if kind == "vllm-chunked" else "off"]
    else:
        mode = {"ours-chunked": "batch"}.get(kind, kind.split("-")[1])
        threads = 2 * args.threads if mode == "disaggregated" else args.threads  # split between its two workers
        cmd = [sys.executable, "-m", "engine", "serve", "--port", str(port), "--mode", mode, "--threads", str(threads)]
        if kind == "ours-chunked":
            cmd += ["--max-num-batched-tokens", str(CHUNK)]
    return started(kind, cmd, port, Path(f"/tmp/bench_traffic_{kind}_{port}.log"), args.start_timeout, env)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="summarisation")
    p.add_argument("--request-rate", type=float, default=0.5)
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt-tokens", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    p.add_argument("--slo-tpot-ms", type=float, default=200.0)
    p.add_argument("--port", type=int, default=8731)
    p.add_argument("--start-timeout", type=float, default=600.0)
    args = p.parse_args()
    workload = shaped(args.workload, request_rate=args.request_rate, num_requests=args.requests,
                      prompt_tokens=args.prompt_tokens, output_tokens=args.max_new_tokens)
    slo = SLO(args.slo_ttft_ms / 1000, args.slo_tpot_ms / 1000)
    rows = []
    for kind in args.servers.split(","):
        with start(kind, args.port, args):
            records, facts = run_traffic(TrafficPlan(f"http://127.0.0.1:{args.port}", workload, args.seed, slo=slo))
        s = traffic_summary(records, slo)
        rows.append(f"| {SERVERS[kind]} | {s['ttft_p50'] * 1e3:,.0f} | {s['ttft_p99'] * 1e3:,.0f} | {s['itl_p50'] * 1e3:,.0f} "
                    f"| {s['itl_p99'] * 1e3:,.0f} | {s['throughput']:.2f} | {s['goodput']:.2f} ({s['good']}/{s['requests']}) |")
        print(rows[-1], flush=True)
    w = workload
    print(f"\n{w.num_requests} requests, '{w.name}' (prompts ~{w.prompt.mean} tokens, spread {w.prompt.spread:g}; outputs "
          f"~{w.output.mean}, spread {w.output.spread:g}), {w.request_rate:g} requests/s Poisson, seed {args.seed}; "
          f"{args.threads} model thread(s); SLOs TTFT <= {args.slo_ttft_ms:g} ms, TPOT <= {args.slo_tpot_ms:g} ms\n")
    print("| server | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) | throughput (req/s) | goodput (req/s) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
