"""Where a decode step's time goes while other programs load the machine: wall time against each thread's CPU time.

For each condition a fresh process loads the model (its default fast paths: the C decode step where this machine
kept it), pins its threads (no governor: `--fixed` behaviour), runs one warm-up and then `--tokens` decode steps, and
reads every thread's /proc/self/task/<tid>/schedstat after each step: time on a CPU (field 1) and time runnable with
no CPU (field 2, the run-queue wait the page states). Beside it, `--beside` programs that behave like browsers
drawing a page (busy `--busy-ms` of every 16.7 ms frame) run on the same cores. Conditions take turns, `--rounds`
times. Per condition it prints the median step, the longest thread's wait per step (what the page subtracts), the
threads' CPU time per step (a thread spinning at an OpenMP barrier is on a CPU, so it counts here and not as wait),
and the rest: TPOT − (quiet TPOT less its own wait) − wait, the inflation a wait does not explain. "stated" is the
wait the page states (per step, the thread that waited longest: RunWatch, as the dashboard runs it); "w all" adds
every thread's wait (per step over the decode).

Usage: .venv/bin/python -m benchmarks.step_cpu --threads 1,2 --beside 0,3 --rounds 2
       .venv/bin/python -m benchmarks.step_cpu --policies default,passive   (OMP_WAIT_POLICY, read once per process)
A measurement, not a test; the machine's other load shows in its numbers (the header says the load average).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from benchmarks._servers import schedstat
from engine.loading.model_store import DEFAULT_MODEL  # torch-free: the parent stays light

PROMPT_TOKENS = 64
HOG = """
import time
busy, frame = {busy} / 1000, 1 / 60
while True:
    start = time.perf_counter()
    while time.perf_counter() - start < busy:
        pass
    time.sleep(max(0.0, frame - busy))
"""


def child(threads: int, tokens: int, model: str) -> None:
    import torch

    import engine

    torch.set_num_threads(threads)
    lm = engine.load_model(model, device="cpu")
    ids = list(range(100, 100 + PROMPT_TOKENS))
    engine.generate(lm, ids, 8, ignore_eos=True)  # warm-up: the decode step built, the caches touched
    marks = []

    def on_step(trace) -> None:
        marks.append((time.perf_counter(), schedstat()))

    from engine.core.metrics import summarize
    from engine.host.run_watch import RunWatch

    trace = engine.generate(lm, ids, tokens, ignore_eos=True, on_step=on_step, watch=RunWatch(adaptive_threads=False))
    (t0, a), (t1, b) = marks[0], marks[-1]  # totals over the decode: a running thread's CPU time advances in ticks
    n = len(marks) - 1
    cpu = [b[t][0] - a.get(t, (0, 0))[0] for t in b]
    wait = [b[t][1] - a.get(t, (0, 0))[1] for t in b]
    steps = sorted(s.seconds for s in trace.steps[1:])
    print(json.dumps(dict(decode_step=str(trace.env.get("backends", {}).get("decode_step", "?")),
                          step=steps[len(steps) // 2], between=(t1 - t0) / n, tpot=summarize(trace).tpot_s,
                          stated=trace.decode_cpu_wait_seconds / len(trace.steps), cpu_sum=sum(cpu) / 1e9 / n,
                          cpu_max=max(cpu) / 1e9 / n, wait_max=max(wait) / 1e9 / n, wait_sum=sum(wait) / 1e9 / n)))


def run_condition(threads: int, beside: int, busy_ms: float, policy: str, tokens: int, model: str) -> dict:
    env = dict(os.environ)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy.upper()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(busy=busy_ms)]) for _ in range(beside)]
    try:
        out = subprocess.run([sys.executable, "-m", "benchmarks.step_cpu", "--child", str(threads), "--tokens",
                              str(tokens), "--model", model], capture_output=True, text=True, env=env, check=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: v * 1e3 if isinstance(v, float) else v for k, v in result.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--beside", default="0,3", help="how many browser-like programs run beside (0: quiet)")
    ap.add_argument("--busy-ms", type=float, default=5.0, help="each program's busy ms per 16.7 ms frame")
    ap.add_argument("--policies", default="default", help="OMP_WAIT_POLICY per condition: default, passive, active")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the finally blocks stop the programs beside
    if args.child:
        child(args.child, args.tokens, args.model)
        return
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {os.cpu_count()} CPUs | load average {os.getloadavg()[0]:.2f} | "
          f"{args.model}, {PROMPT_TOKENS} -> {args.tokens} tokens, fixed threads | beside: programs busy "
          f"{args.busy_ms:g} of every 16.7 ms | step: median; the rest per step over the decode, ms", flush=True)
    print(f"{'threads':>7} {'policy':>8} {'beside':>6} | {'TPOT':>6} {'stated':>6} {'w all':>6} {'cpu all':>7} "
          f"{'cpu max':>7} | {'rest':>6} {'rest all':>8}", flush=True)
    quiet: dict = {}
    conditions = [(t, p, b) for t in map(int, args.threads.split(",")) for p in args.policies.split(",")
                  for b in map(int, args.beside.split(","))]
    for _ in range(args.rounds):
        for threads, policy, beside in conditions:
            m = run_condition(threads, beside, args.busy_ms, policy, args.tokens, args.model)
            if beside == 0:
                quiet[(threads, policy)] = m["tpot"] - m["stated"]
            base = quiet.get((threads, policy), float("nan"))
            print(f"{threads:>7} {policy:>8} {beside:>6} | {m['tpot']:6.2f} {m['stated']:6.2f} {m['wait_sum']:6.2f} "
                  f"{m['cpu_sum']:7.2f} {m['cpu_max']:7.2f} | {m['tpot'] - base - m['stated']:6.2f} "
                  f"{m['tpot'] - base - m['wait_sum']:8.2f}  [{m['decode_step']}]", flush=True)


if __name__ == "__main__":
    main()
