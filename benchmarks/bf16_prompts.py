"""bfloat16 prompts vs float32's, side by side in one process (the target: bfloat16
prefill no slower than float32).

Loads the model twice with the fast kernels, in float32 and in bfloat16 (with whatever the bfloat16 model chose for
its prompts on this machine: its own pass, or the float32 pass from a widened copy), then times a prefill of the
same prompt ids in both, taking turns in balanced orders (engine/labs/bench.py), medians of --repeats rounds.
Two benches minutes apart cannot answer this on a shared machine: the host's speed moves more between them than
the difference being asked about.

    flock /tmp/tb/bench.lock .venv/bin/python -m benchmarks.bf16_prompts [--repeats 5] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import time
from functools import partial

from engine.loading.model_store import DEFAULT_MODEL  # torch-free: --help answers at once

SIZES = (128, 512, 1024)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", metavar="PATH", help="also write the medians (seconds) as JSON")
    args = p.parse_args()
    from engine.labs.bench import medians, prompt_ids, time_prefill_ours
    from engine.loading.loader import load_model

    f32 = load_model(args.model, "cpu", "float32", kernels="fast")
    bf16 = load_model(args.model, "cpu", "bfloat16", kernels="fast")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {args.model} | {args.repeats} rounds, medians\n"
          f"# float32: {f32.kernels}\n# bfloat16: {bf16.kernels}")
    rows = {}
    print(f"{'prompt tokens':>13} {'float32 ms':>11} {'bfloat16 ms':>12} {'bf16/f32':>9}")
    for n in SIZES:
        ids = prompt_ids(f32, n)
        for lm in (f32, bf16):  # one untimed pass each: first-call allocations are not the dtype's cost
            time_prefill_ours(lm, ids)
        got = medians(args.repeats, {"float32": partial(time_prefill_ours, f32, ids),
                                     "bfloat16": partial(time_prefill_ours, bf16, ids)})
        rows[f"prefill {n}"] = got
        print(f"{n:>13} {got['float32'] * 1e3:>11.1f} {got['bfloat16'] * 1e3:>12.1f} "
              f"{got['bfloat16'] / got['float32']:>9.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, repeats=args.repeats, float32_kernels=f32.kernels,
                           bfloat16_kernels=bf16.kernels, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
