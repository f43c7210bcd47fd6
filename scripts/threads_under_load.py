"""Decode TPOT with threads chosen while decoding vs fixed threads, while other programs hold the cores.

Each load is started beside `python -m engine generate` (a fresh process per run, adaptive and --fixed-threads
taking turns): quiet (nothing), one busy loop (a core held: the class server's Streamlit, another job), two
busy loops (both cores held), two bursty loops (30 ms busy, 30 ms asleep: a browser drawing). Prints each run's
TTFT, TPOT, ITL p50/p99, measured CPU wait per step and the thread changes, then medians and fixed/adaptive.

Usage: .venv/bin/python scripts/threads_under_load.py [--rounds 2] [--tokens 96] [--loads quiet,1-hog,2-hogs,2-bursty]
A measurement, not a test: the numbers go in the README ("Threads chosen while decoding").
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

BUSY = "while True: pass"
BURSTY = "import time\nwhile True:\n t = time.time()\n while time.time() - t < 0.03: pass\n time.sleep(0.03)"
LOADS = {"quiet": [], "1-bursty": [BURSTY], "1-hog": [BUSY], "2-hogs": [BUSY, BUSY], "2-bursty": [BURSTY, BURSTY]}
VARIANTS = {"adaptive": [], "fixed": ["--fixed-threads"]}


def one_run(tokens: int, extra: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", "Explain the sky",
                          "--prompt-tokens", "64", "--max-new-tokens", str(tokens), "--ignore-eos", *extra],
                         capture_output=True, text=True).stdout
    tpot = re.search(r"^TPOT\s+([\d.,]+)", out, re.M)
    ttft = re.search(r"^TTFT \(prefill\)\s+([\d.,]+)", out, re.M)
    itl = re.search(r"^ITL p50 / p90 / p99 / max\s+([\d.,]+) / ([\d.,]+) / ([\d.,]+)", out, re.M)
    wait = re.search(r"CPU wait.*?: ([\d.,]+) ms per decode step", out)
    note = re.search(r"^threads chosen by measurement: (.*)$", out, re.M)
    if not tpot:
        raise SystemExit(f"engine generate printed no TPOT:\n{out[-2000:]}")
    number = lambda m, i=1: float(m.group(i).replace(",", "")) if m else float("nan")  # noqa: E731
    return dict(tpot=number(tpot), ttft=number(ttft), p50=number(itl), p99=number(itl, 3), wait=number(wait),
                note=note.group(1) if note else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--loads", default=",".join(LOADS))
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {args.rounds} rounds, adaptive and fixed taking "
          f"turns | 64 -> {args.tokens} tokens, fresh process each run")
    summary = []
    for load in args.loads.split(","):
        hogs = [subprocess.Popen([sys.executable, "-c", code]) for code in LOADS[load]]
        try:
            time.sleep(0.5)
            runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
            for rnd in range(args.rounds):
                for name, extra in (VARIANTS.items() if rnd % 2 == 0 else reversed(VARIANTS.items())):
                    r = one_run(args.tokens, extra)
                    runs[name].append(r)
                    print(f"{load:9s} round {rnd + 1} {name:8s} TTFT {r['ttft']:6.1f} ms  TPOT {r['tpot']:6.1f} ms  "
                          f"ITL p50 {r['p50']:6.1f} "
                          f"p99 {r['p99']:7.1f}  wait {r['wait']:5.1f} ms/step  {r['note'][:110]}", flush=True)
        finally:
            for h in hogs:
                h.kill()
        med = {(name, key): statistics.median(r[key] for r in rs) for name, rs in runs.items() for key in ("ttft", "tpot")}
        summary.append((load, med))
    print("\nload       adaptive TTFT  fixed TTFT  fixed/adaptive | adaptive TPOT  fixed TPOT  fixed/adaptive")
    for load, m in summary:
        ttft, tpot = (m["adaptive", "ttft"], m["fixed", "ttft"]), (m["adaptive", "tpot"], m["fixed", "tpot"])
        print(f"{load:9s} {ttft[0]:10.1f} ms {ttft[1]:8.1f} ms {ttft[1] / ttft[0]:10.2f}x | "
              f"{tpot[0]:10.1f} ms {tpot[1]:8.1f} ms {tpot[1] / tpot[0]:10.2f}x")


if __name__ == "__main__":
    main()
