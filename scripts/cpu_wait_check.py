"""Does the stated CPU wait account for what another program added to a decode step? Measured, not assumed.

The page subtracts the wait it measured (engine/host/cpu_wait.py: per step, the longest-waiting thread's run-queue
delay) from TPOT to say what the step would have taken alone. That is right only if a step lengthens by about
the wait. Here a browser-like program (busy B ms out of every P ms, one process) runs beside one model's decode
loop (fixed threads, as bench); each condition's mean step, its measured wait (longest thread and all threads),
and the time it added over the quiet loop run in the same rounds, conditions taking turns (reversed every other
round). `added / wait` near 1: the wait is the disturbance; below 1: the wait overstates it (while one thread
waits for a core the other may stream the memory alone, faster); above 1: something the wait does not see.

Usage: .venv/bin/python scripts/cpu_wait_check.py [--rounds 4] [--tokens 64] [--model NAME] [--json PATH]
A benchmark, not a test: run it alone (`flock /tmp/tb/bench.lock ...` on a shared machine).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import engine  # noqa: E402
from engine.core.generate import decode_loop, greedy, new_cache, prefill, warm_up  # noqa: E402
from engine.host.cpu_wait import CpuWaitMeter  # noqa: E402
from engine.host.run_watch import RunWatch  # noqa: E402
from engine.loading.loader import set_threads  # noqa: E402
from engine.loading.model_store import DEFAULT_MODEL  # noqa: E402

BURSTS = r"""
import sys, time
busy, period = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3
while True:  # busy `busy` s, then asleep for the rest of `period`: a page redrawn at 1/period frames a second
    t = time.perf_counter()
    while time.perf_counter() - t < busy:
        pass
    time.sleep(max(period - busy, 0.0))
"""
CONDITIONS = {"quiet": None, "2 of 16.7 ms": (2, 16.7), "5 of 16.7 ms": (5, 16.7), "8 of 16.7 ms": (8, 16.7),
              "5 of 33 ms": (5, 33.0)}  # name: (busy ms, period ms) of the program beside the loop


def one_loop(lm, ids: list[int], tokens: int) -> dict:
    """One prefill, then `tokens` decode steps: mean step ms and the mean wait per step (longest, all threads)."""
    cache = new_cache(lm, 1, len(ids) + tokens + 1)
    token = greedy(prefill(lm, torch.tensor([ids]), cache))
    watch = RunWatch(adaptive_threads=False)
    meter = watch.meter
    longest, threads = [], []

    def after(_token, _seconds):
        longest.append(meter.last.longest)
        threads.append(meter.last.threads)
        return True

    seconds = decode_loop(lm, token, cache, tokens, watch=watch, after_step=after)
    n = len(seconds)
    return dict(step_ms=1e3 * sum(seconds) / n, wait_ms=1e3 * sum(longest) / n, wait_all_ms=1e3 * sum(threads) / n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--conditions", default=",".join(CONDITIONS), help="a comma-separated subset (quiet first)")
    ap.add_argument("--json", default="", help="also write the medians to this file")
    args = ap.parse_args()
    names = [c.strip() for c in args.conditions.split(",")]
    unknown = [c for c in names if c not in CONDITIONS]
    if unknown or not names or names[0] != "quiet":
        raise SystemExit(f"--conditions: 'quiet' first, then any of {', '.join(CONDITIONS)} (got {args.conditions})")
    meter = CpuWaitMeter()
    if not meter.available:
        raise SystemExit(f"nothing to check: {meter.reason}")
    set_threads(torch.get_num_threads())
    lm = engine.load_model(args.model, device="cpu")
    ids = list(range(1000, 1064)) if lm.config.vocab_size > 1064 else list(range(3, 67))
    warm_up(lm, 1)
    one_loop(lm, ids, args.tokens)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {lm.name} | {lm.kernels} | {torch.get_num_threads()} threads | "
          f"64 -> {args.tokens} tokens, {args.rounds} rounds")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for rnd in range(args.rounds):
        for name in (names if rnd % 2 == 0 else names[::-1]):
            beside = None
            if CONDITIONS[name]:
                busy, period = CONDITIONS[name]
                beside = subprocess.Popen([sys.executable, "-c", BURSTS, str(busy), str(period)])
                time.sleep(0.3)  # started and in its rhythm
            try:
                runs[name].append(one_loop(lm, ids, args.tokens))
            finally:
                if beside is not None:
                    beside.kill()
                    beside.wait()
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    quiet = med["quiet"]["step_ms"]
    print(f"{'beside the loop':16s} {'step ms':>8s} {'wait ms':>8s} {'all thr.':>8s} {'added ms':>9s} "
          f"{'added/wait':>10s} {'(step-wait)/quiet':>18s}")
    for name, m in med.items():
        added = m["step_ms"] - quiet
        m["added_ms"] = added
        m["added_per_wait"] = added / m["wait_ms"] if name != "quiet" and m["wait_ms"] > 0 else None
        m["net_over_quiet"] = (m["step_ms"] - m["wait_ms"]) / quiet
        ratio = "-" if m["added_per_wait"] is None else f"{m['added_per_wait']:.2f}"
        print(f"{name:16s} {m['step_ms']:8.2f} {m['wait_ms']:8.2f} {m['wait_all_ms']:8.2f} {added:9.2f} "
              f"{ratio:>10s} {m['net_over_quiet']:18.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(date=time.strftime("%Y-%m-%d %H:%M"), model=lm.name,
                                                   kernels=lm.kernels, rounds=args.rounds, medians=med), indent=1))


if __name__ == "__main__":
    main()
