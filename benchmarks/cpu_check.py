"""The CPU targets (docs/performance.md) on this machine, in one call: every measurement they name, then one line
per target.

Runs the steps below one after another (alone: `flock /tmp/tb/bench.lock ...` on a shared machine) and writes under
OUT (default ./cpu-check), each the moment it is known: <step>.log and <step>.json per step, then targets.md (a table
for docs/performance.md, which says what each target is) and targets.json. A target reads "met", "within 5 %" (over
its bound by less than the run-to-run noise of these shared machines), "missed", or "not measured" when its step did
not run. bfloat16's targets are the issue's for CPUs with AVX-512 BF16 or AMX; elsewhere they are measured and said,
marked as not the issue's case.

Exit status: 0 when every step ran (met or not: a benchmark on a shared machine reports, it does not gate), 1 when a
step failed or timed out (its log says why; the others still ran).

Usage: .venv/bin/python -m benchmarks.cpu_check [--out DIR] [--repeats 3] [--rounds 3] [--steps bench-float32,start,...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from engine.serving.api_server import WORKER_DEFAULT  # the worker `engine serve` runs by default

ROOT = Path(__file__).resolve().parents[1]

NOISE = 1.05  # a ratio up to 5 % over its bound: "within 5 %", not "missed" (the same code reads ±5-7 % run to run)
STEP_TIMEOUT_S = 1800


def steps(out: Path, repeats: int, rounds: int) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "bench-float32": [py, "-m", "engine", "bench", "--repeats", str(repeats), "--json", str(out / "bench-float32.json")],
        "bench-bfloat16": [py, "-m", "engine", "bench", "--repeats", str(repeats), "--dtype", "bfloat16", "--no-vllm",
                           "--json", str(out / "bench-bfloat16.json")],
        "bf16-prompts": [py, "-m", "benchmarks.bf16_prompts", "--repeats", str(repeats + 2), "--json",
                         str(out / "bf16-prompts.json")],
        "start": [py, "-m", "benchmarks.startup_time", "--full", "--rounds", str(rounds), "--json", str(out / "start.json")],
        "serve": [py, "-m", "benchmarks.serve_vs_inprocess", "--rounds", str(rounds), "--json", str(out / "serve.json")],
        "disturbance": [py, "-m", "benchmarks.disturbance", "--rounds", str(rounds), "--configs", "defaults", "--json"],
    }


def run_step(name: str, cmd: list[str], out: Path) -> dict | None:
    """Run one step with its output in OUT/<name>.log; its JSON (written by the step, or the last line it printed)
    saved as OUT/<name>.json; None when it failed."""
    log = out / f"{name}.log"
    began = time.monotonic()
    print(f"[cpu_check] {name}: {' '.join(cmd[1:])}", flush=True)
    try:
        with open(log, "w") as f:
            code = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        code = "timed out"
    took = time.monotonic() - began
    target = out / f"{name}.json"
    if code == 0 and not target.exists():  # a step that prints its JSON as its last line (disturbance.py)
        last = (log.read_text().strip().splitlines() or [""])[-1]
        if last.startswith(("[", "{")):
            target.write_text(last)
    if code != 0 or not target.exists():
        print(f"[cpu_check] {name} FAILED ({code}) after {took:.0f} s: see {log}", flush=True)
        return None
    print(f"[cpu_check] {name} done in {took:.0f} s", flush=True)
    return json.loads(target.read_text())


# ------------------------------------------------------------------------------------------------
# The targets (docs/performance.md), from the steps' numbers
# ------------------------------------------------------------------------------------------------
def verdict(ratio: float | None, bound: float) -> str:
    if ratio is None:
        return "not measured"
    return "met" if ratio <= bound else "within 5 %" if ratio <= bound * NOISE else "missed"


def _line(section: str, target: str, measured: str, ratio: float | None, bound: float, note: str = "") -> dict:
    return dict(section=section, target=target, measured=measured, ratio=ratio, verdict=verdict(ratio, bound), note=note)


def _worst(rows: dict, ratio_of, names) -> tuple[float | None, str]:
    """The largest ratio over the named rows (and which row it was); None when no row has both numbers."""
    got = [(ratio_of(rows[n]), n) for n in names if n in rows and ratio_of(rows[n]) is not None]
    return max(got) if got else (None, "")


def _ratio(a: str, b: str):
    return lambda row: row[a] / row[b] if row.get(a) and row.get(b) else None


def _own_read(row: dict) -> str:
    """' (1.01x torch's read of the same bytes ...)' where the bench timed that read (benches before 2026-12-04 did not)."""
    r = _ratio("fast", "read")(row)
    return f" ({r:.2f}x torch's read of the same bytes in the step's pieces, same rounds)" if r else ""


def bench_lines(f32: dict | None, bf16: dict | None, prompts: dict | None = None) -> list[dict]:
    lines = []
    timed = ("prefill 128", "prefill 512", "prefill 1024", "decode 128", "decode 1024")
    for dtype, bench in (("float32", f32), ("bfloat16", bf16)):
        rows = (bench or {}).get("rows", {})
        for other in ("plain", "hf"):
            r, where = _worst(rows, _ratio("fast", other), timed)
            lines.append(_line("1", f"{dtype}: fast ≤ {other} on every row", f"worst fast/{other} "
                               + (f"{r:.2f} ({where})" if r else "-"), r, 1.0))
    rows = (f32 or {}).get("rows", {})
    for ctx in ("decode 128", "decode 1024"):
        r = _ratio("fast", "floor")(rows[ctx]) if ctx in rows else None
        lines.append(_line("1", f"float32 {ctx.replace('decode', 'decode @')} ≤ 1.3x its floor",
                           f"{rows[ctx]['fast'] * 1e3:.1f} ms = {r:.2f}x{_own_read(rows[ctx])}" if r else "-", r, 1.3))
    for name, what in (("prefill 128", "TTFT"), ("prefill 512", "TTFT"), ("prefill 1024", "TTFT"),
                       ("decode 128", "ITL"), ("decode 1024", "ITL")):
        r = _ratio("fast", "vLLM")(rows[name]) if name in rows else None
        label = name.replace("decode ", "context ").replace("prefill ", "") + (" tokens" if what == "TTFT" else "")
        lines.append(_line("1", f"ours/vLLM ≤ 1.0 on {what}, {label}", f"{r:.2f}" if r else "- (no vLLM column)", r, 1.0))
    flags = set((bf16 or f32 or {}).get("vector_flags", []))
    bf16_cpu = bool(flags & {"avx512_bf16", "amx_bf16"})
    note = "" if bf16_cpu or not (bf16 or f32) else "this CPU has no AVX-512 BF16 or AMX: not the issue's case"
    rows16 = (bf16 or {}).get("rows", {})
    for ctx in ("decode 128", "decode 1024"):
        r = _ratio("fast", "floor")(rows16[ctx]) if ctx in rows16 else None
        lines.append(_line("2", f"bfloat16 {ctx.replace('decode', 'decode @')} ≤ 1.5x its floor",
                           f"{rows16[ctx]['fast'] * 1e3:.1f} ms = {r:.2f}x{_own_read(rows16[ctx])}" if r else "-", r, 1.5,
                           note))
    side = (prompts or {}).get("rows", {})
    for n in ("prefill 128", "prefill 512", "prefill 1024"):  # side by side in one process (bf16_prompts.py)
        got = side.get(n)
        r = got["bfloat16"] / got["float32"] if got else None
        lines.append(_line("2", f"bfloat16 {n} ≤ float32's (fast)", f"{got['bfloat16'] * 1e3:.0f} vs "
                           f"{got['float32'] * 1e3:.0f} ms = {r:.2f}" if r else "-", r, 1.0, note))
    same = rows16.get("same greedy tokens")
    if same:
        lines.append(dict(section="2", target="bfloat16 fast and plain: the same greedy tokens",
                          measured=f"{'yes' if same['same'] else 'no'}: the first {same['agree']} of {same['tokens']} agree",
                          ratio=None, verdict="said", note="agreement with float32: docs/decisions/bfloat16.md"))
    return lines


def serve_lines(serve: dict | None) -> list[dict]:
    med = (serve or {}).get("medians", {})
    base, ours = med.get("in process"), med.get(WORKER_DEFAULT)
    lines = []
    for key, what in (("ttft", "TTFT"), ("itl", "ITL")):
        r = ours[key] / base[key] if base and ours else None
        lines.append(_line("2b", f"behind HTTP (engine serve, --worker {WORKER_DEFAULT}): {what} ≤ 1.1x in process",
                           f"{ours[key] * 1e3:.1f} vs {base[key] * 1e3:.1f} ms = {r:.2f}x" if r else "-", r, 1.1))
    return lines


def start_lines(start: dict | None) -> list[dict]:
    usable = sorted(r["Run button usable"] for r in (start or {}).get("rounds", []) if "Run button usable" in r)
    median = usable[len(usable) // 2] if usable else None
    return [_line("3", "bash scripts/dashboard.sh to a usable Run button ≤ 5 s (median)",
                  f"{median:.2f} s (rounds {', '.join(f'{u:.2f}' for u in usable)})" if usable else "-",
                  median / 5.0 if median else None, 1.0)]


def disturbance_lines(rows: list | None) -> list[dict]:
    row = next((r for r in rows or [] if r.get("config") == "defaults"), None)
    if row is None:
        return [_line("4", "page TPOT ≤ 1.15x the CLI's, or less its shown wait", "-", None, 1.15)]
    plain, net = row["page_tpot"] / row["cli_tpot"], row["page_net"] / row["cli_tpot"]
    shown = row["waits_shown"] > 0
    best = min(plain, net) if shown else plain
    return [_line("4", "page TPOT ≤ 1.15x the CLI's, or less its shown wait",
                  f"page {row['page_tpot']:.1f} ms (waited {row['page_wait']:.1f}) vs CLI {row['cli_tpot']:.1f}: "
                  f"{plain:.2f}x, {net:.2f}x less the wait (shown in {row['waits_shown']}/{row['rounds']} runs)",
                  best, 1.15)]


def target_lines(results: dict) -> list[dict]:
    return (bench_lines(results.get("bench-float32"), results.get("bench-bfloat16"), results.get("bf16-prompts"))
            + serve_lines(results.get("serve"))
            + start_lines(results.get("start")) + disturbance_lines(results.get("disturbance")))


def machine_line(results: dict) -> str:
    benches = [(d, results[f"bench-{d}"]) for d in ("float32", "bfloat16") if results.get(f"bench-{d}")]
    if not benches:
        return f"{time.strftime('%Y-%m-%d %H:%M')}, the bench did not run: machine unknown"
    bench = benches[0][1]
    rates = "; ".join(f"{d} bench: streaming read {b['read_bytes_per_s'] / 1e9:.1f} GB/s, matmul "
                      f"{b['matmul_flops_per_s'] / 1e9:.0f} GFLOP/s" for d, b in benches)
    return (f"{bench['date']}, {bench['cpu']} ({', '.join(bench['vector_flags']) or 'no AVX'}; torch's kernels: "
            f"{bench['capability']}), torch {bench['torch']}, {bench['threads']} threads; {rates}")


def markdown(results: dict, lines: list[dict]) -> str:
    out = [f"The CPU targets, `benchmarks/cpu_check.py`: {machine_line(results)}", "",
           "| § | target | measured | verdict |", "|---|---|---|---|"]
    for x in lines:
        note = f" ({x['note']})" if x["note"] else ""
        out.append(f"| {x['section']} | {x['target']} | {x['measured']} | {x['verdict']}{note} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "cpu-check")
    p.add_argument("--repeats", type=int, default=3, help="the benches' alternating rounds")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the start, serve and disturbance scripts")
    p.add_argument("--steps", default=None, help="a comma-separated subset of: " + ", ".join(steps(Path("."), 1, 1)))
    args = p.parse_args(argv)
    every = steps(args.out, args.repeats, args.rounds)
    chosen = [s.strip() for s in args.steps.split(",")] if args.steps else list(every)
    unknown = [s for s in chosen if s not in every]
    if unknown:
        p.error(f"unknown step {', '.join(unknown)}: choose from {', '.join(every)}")
    args.out.mkdir(parents=True, exist_ok=True)
    results, failed = {}, []
    for name in chosen:
        (args.out / f"{name}.json").unlink(missing_ok=True)  # never read an earlier run's numbers as this one's
        results[name] = run_step(name, every[name], args.out)
        if results[name] is None:
            failed.append(name)
    lines = target_lines(results)
    (args.out / "targets.json").write_text(json.dumps(dict(machine=machine_line(results), targets=lines), indent=1))
    (args.out / "targets.md").write_text(markdown(results, lines))
    print(markdown(results, lines))
    if failed:
        print(f"[cpu_check] failed: {', '.join(failed)} (their targets read 'not measured')", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
