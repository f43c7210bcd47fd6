"""Fit each device class's efficiencies on the calibration rows of the published table, then report every split.

    .venv/bin/python -m benchmarks.calibrate_card_model            # fit, print the values and the errors
    .venv/bin/python -m benchmarks.calibrate_card_model --report   # no fit: the errors of the values in cards.py
    .venv/bin/python -m benchmarks.calibrate_card_model --markdown # no fit: every row, model vs published (for the docs)

The fit minimises the mean squared log error (a 20 % miss weighs the same on 5 ms as on 500 ms) over the rows marked
`calibration` in assets/published/gpu_measurements.csv, with each value kept inside its published range
(engine/perfmodel/cards.py). The rows marked `validation` are never seen by it: the report shows them apart, and
tests/engine/perfmodel/test_published.py checks them. The values printed are copied into cards.py by hand, with their
source: a fit is a claim, and the file that holds it says so. Nelder-Mead in numpy (no scipy here); a few seconds.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from engine.perfmodel import cards as cd
from engine.perfmodel import published as pb

FREE = {  # the values each class's calibration rows can pin down (the others stay at their estimates)
    "datacenter-gpu": ["mfu", "mbu", "layer_s", "pass_s", "allreduce_s", "allreduce_doubling_s", "overlap"],
    "consumer-gpu": ["mfu", "mbu"],
    "apple-gpu": ["mfu", "mbu"],
}


def nelder_mead(f, x0: np.ndarray, steps: np.ndarray, iters: int = 600) -> np.ndarray:
    n = len(x0)
    simplex = [x0] + [x0 + np.eye(n)[i] * steps[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centre + (centre - worst)
        fr = f(reflected)
        if fr < values[0]:
            expanded = centre + 2 * (centre - worst)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centre + 0.5 * (worst - centre)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (x - best) for x in simplex]
                values = [f(x) for x in simplex]
    return simplex[int(np.argmin(values))]


def _bounded(x: float, p: cd.Param) -> float:
    return min(max(x, p.low), p.high) if p.high > p.low else p.value


def with_values(klass: str, values: dict[str, float]):
    """Cards of `klass` with these class values (and the overlap exponent) in place of cards.py's."""
    overlap = values.get("overlap")
    if overlap is not None:
        cd.OVERLAP = replace(cd.OVERLAP, value=overlap)
    others = {k: v for k, v in values.items() if k != "overlap"}
    cd.CLASSES[klass] = replace(cd.CLASSES[klass], **{k: replace(getattr(cd.CLASSES[klass], k), value=v)
                                                      for k, v in others.items()})


def fit(klass: str, rows: list[pb.Measurement]) -> dict[str, float]:
    names = FREE[klass]
    params = {n: (cd.OVERLAP if n == "overlap" else getattr(cd.CLASSES[klass], n)) for n in names}
    x0 = np.array([math.log(max(params[n].value, 1e-9)) for n in names])

    def values_of(x):
        return {n: _bounded(math.exp(v), params[n]) for n, v in zip(names, x)}

    def loss(x):
        with_values(klass, values_of(x))
        return float(np.mean([math.log(m.predicted_ms() / m.published_ms) ** 2 for m in rows]))

    best = nelder_mead(loss, x0, np.full(len(names), 0.3))
    values = values_of(best)
    with_values(klass, values)
    return values


def report(rows: list[pb.Measurement]) -> None:
    groups = defaultdict(list)
    for m in rows:
        groups[(m.split, m.software, m.card)].append(m.error())
    print(f"\n{'split':13} {'source':58} {'card':10} {'rows':>4} {'rms':>5} {'worst':>6} {'>35%':>5}")
    for (split, software, card), errs in sorted(groups.items()):
        rms = math.sqrt(sum(e * e for e in errs) / len(errs))
        worst = max(errs, key=abs)
        print(f"{split:13} {software[:58]:58} {card:10} {len(errs):4d} {rms:5.0%} {worst:+6.0%} "
              f"{sum(abs(e) > pb.TOLERANCE for e in errs):5d}")
    for split in pb.SPLITS:
        errs = [m.error() for m in rows if m.split == split]
        if errs:
            print(f"{split}: {len(errs)} rows, rms {math.sqrt(sum(e * e for e in errs) / len(errs)):.0%}, "
                  f"{sum(abs(e) <= pb.TOLERANCE for e in errs)}/{len(errs)} within ±{pb.TOLERANCE:.0%}")


def markdown(rows: list[pb.Measurement]) -> None:
    """Every row as a markdown table: what was measured, where, the published time, the model's, the error."""
    print("| row | split | what | card | published | model | error | source |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for m in rows:
        shape = f"{m.model} {m.dtype}" + (f" x{m.gpus}" if m.gpus > 1 else "") + f", B={m.batch}, "
        shape += {"ttft": f"prefill {m.prompt}", "tpot": f"decode at {m.context or m.prompt + m.output // 2}",
                  "e2e": f"{m.prompt} in / {m.output} out"}[m.kind]
        err = m.error()
        flag = "" if abs(err) <= pb.TOLERANCE else " **!**"
        print(f"| {m.id} | {m.split} | {shape} | {m.card} | {m.published_ms:,.2f} ms | {m.predicted_ms():,.2f} ms | "
              f"{err:+.0%}{flag} | [{m.software}]({m.source}) |")
    print()
    print("| ratio | what | published | model |")
    print("|---|---|---:|---:|")
    for r in pb.load_ratios(rows):
        print(f"| {r.id} | {r.note} | x{r.published:.2f} | x{r.predicted:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="no fit: the errors of the values in cards.py")
    ap.add_argument("--markdown", action="store_true", help="no fit: every row, model vs published, as markdown")
    args = ap.parse_args()
    rows = pb.load()
    if args.markdown:
        markdown(rows)
        return 0
    if not args.report:
        for klass in FREE:
            calib = [m for m in rows if m.split == "calibration" and pb.card(m.card).device_class == klass]
            if not calib:
                continue
            values = fit(klass, calib)
            shown = ", ".join(f"{k} {v * 1e6:.1f} µs" if k.endswith("_s") else f"{k} {v:.3f}" for k, v in values.items())
            print(f"{klass} ({len(calib)} calibration rows): {shown}")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
