"""Is the fleet simulator right on this machine? Calibrate its step model on the real engine, replay the Traffic
lab's workloads on the engine and on the simulator, print the comparison.

Before each workload the step model is fitted on separate calibration bursts (it never sees the replayed steps; a
shared machine's speed drifts, so it is refitted each time); each workload is its preset's lengths (cut to the
model's context) at 0.5 x the engine's capacity by that fit, 16 requests, Poisson arrivals, one replica in
batch mode. Differences over 20 % are marked, never hidden. --save writes assets/fleet_check.json, labelled as a
recording from the machine that ran it (host and date): no page reads it — the Fleet planner estimates cards with the
card model, and this machine from peaks measured in the dashboard's own session.

    .venv/bin/python -m benchmarks.fleet_check                       # SmolLM2-135M (on a quiet machine)
    .venv/bin/python -m benchmarks.fleet_check --model tiny-llama
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from engine.loading.model_store import DEFAULT_MODEL  # torch-free: --help answers at once

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--load", type=float, default=0.5, help="arrival rate as a share of the engine's capacity")
    ap.add_argument("--save", action="store_true", help="write assets/fleet_check.json: a recording, labelled with this "
                    "host and date (no page reads it)")
    args = ap.parse_args()
    from engine.labs import fleet_check as fc
    from engine.perfmodel import step_model as sm

    started = time.time()
    fit, rows = fc.check(args.model, max_batch=args.max_batch, n=args.requests, load=args.load,
                         progress=lambda m: print(f"... {m}", flush=True))
    m = fit.model
    lone = "" if m.lone_s is None else f"; a one-token step {m.lone_s * 1e3:.2f} ms + the same per KV byte"
    print(f"\nstep model ({m.source}): {m.fixed_s * 1e3:.2f} ms + {m.per_token_s * 1e6:.1f} µs/token "
          f"+ {m.per_kv_byte_s * 1e12:.2f} ps/KV byte{lone}; residuals rms {fit.rms_s * 1e3:.2f} ms")
    print("\n| workload | metric | engine (measured) | simulator | difference | within 20 % |\n|---|---|---|---|---|---|")
    for r in rows:
        unit, k = ("req/s", 1) if r.metric == "goodput" else ("ms", 1e3)
        print(f"| {r.workload} | {r.metric} | {r.engine * k:.1f} {unit} | {r.sim * k:.1f} {unit} | {r.error:+.0%} | "
              f"{'yes' if r.within else '**no**'} |")
    print(f"\n{sum(r.within for r in rows)}/{len(rows)} within 20 %; {time.time() - started:.0f} s")
    if args.save:
        note = (f"a recording from another machine: {args.model} on {platform.node()} ({platform.processor() or 'cpu'}), "
                f"{time.strftime('%Y-%m-%d %H:%M')}, by benchmarks/fleet_check.py --save. No page reads it")
        fitted = {**sm.to_dict(m), "source": m.source.replace("this machine", platform.node())}
        data = {"note": note, "fit": fitted,
                "residuals": [(s.kind, s.tokens, s.seconds, p, s.kv_bytes) for s, p in zip(fit.steps, fit.predicted)],
                "rows": [(r.workload, r.metric, r.engine, r.sim) for r in rows]}
        (ROOT / "assets" / "fleet_check.json").write_text(json.dumps(data, indent=1))
        print("saved assets/fleet_check.json (a recording, labelled as one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
