"""How much does the page disturb what it measures, and does its stated CPU wait account for it? Page vs CLI.

Starts the real dashboard (headless Chromium on the same cores drives it) and alternates, round after round:
  the page:  press Run with the default request (64 prompt tokens -> 32, greedy), read the TPOT Home shows and the
             CPU wait the run panel states ("waited N ms per token for a CPU", engine/host/cpu_wait.py);
  the CLI:   `python -m engine generate --json` for the same 64 prompt tokens and 32 new tokens: its TPOT and wait.
Once with the dashboard's defaults (live chart and streamed text on) and once with Quiet timing (nothing drawn
while the model runs). Prints medians and the ratios page / CLI and (page - its wait) / CLI (issue 19 §4's
target: one of them <= 1.15 with defaults), and the CPU seconds the browser, Streamlit and the worker used per
page run. A benchmark, not a test: run it alone (`flock /tmp/tb/bench.lock ...` on a shared machine).

Usage: .venv/bin/python -m benchmarks.disturbance [--rounds 4] [--configs defaults,quiet] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from engine.core.metrics import summarize
from engine.core.trace import Trace
from engine.loading.model_store import DEFAULT_MODEL
from tests.browser import appdriver
from ui.text import prompts

CONFIGS = {"defaults": False, "quiet": True}  # name: Quiet timing on
CPU_OF = {"browser": "chromium", "streamlit": "ui.controls.launch", "worker": "engine.serving.scheduling.worker"}
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int, name_part: str) -> float:
    """CPU seconds (user + system) of `root` and its descendants whose command line holds `name_part`: only this
    script's own dashboard and browser, never another user's on a shared machine."""
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            todo += [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                     for c in (t / "children").read_text().split()]
            if name_part in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15 of stat)
        except (OSError, IndexError, ValueError):
            continue
    return total


WAIT = re.compile(r"waited for a CPU ([\d,]+(?:\.\d+)?) ms per token, ([\d,]+(?:\.\d+)?) ms in prefill")


def cli_once(text: str, model: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", text, "--prompt-tokens", "64",
                          "--max-new-tokens", "32", "--model", model, "--json"],
                         capture_output=True, text=True, check=True, cwd=appdriver.ROOT)
    trace = Trace.from_json(out.stdout)
    wait = trace.decode_cpu_wait_seconds / len(trace.steps) if trace.steps and trace.cpu_wait_seconds is not None else 0.0
    return dict(tpot=summarize(trace).tpot_s * 1e3, wait=wait * 1e3, ttft=trace.prefill_seconds * 1e3,
                ttft_wait=trace.prefill_cpu_wait_seconds * 1e3)


def shown_wait_ms(page) -> tuple[float | None, float | None]:
    """The CPU wait per token and in prefill the run panel's 'Run finished' line states; None when it states none."""
    labels = page.locator("[data-testid='stExpander'] summary").filter(has_text="Run finished")
    match = WAIT.search(labels.first.inner_text()) if labels.count() else None
    return tuple(float(g.replace(",", "")) for g in match.groups()) if match else (None, None)


def page_once(page, server_pid: int) -> dict:
    roots = {"browser": os.getpid(), "streamlit": server_pid, "worker": server_pid}
    before = {k: tree_cpu(roots[k], v) for k, v in CPU_OF.items()}
    appdriver.press_run(page)
    time.sleep(0.5)
    appdriver.wait_for_result(page, 600_000)
    cpu = {k: tree_cpu(roots[k], v) - before[k] for k, v in CPU_OF.items()}
    wait, ttft_wait = shown_wait_ms(page)
    return dict(tpot=appdriver.shown_ms(page, "TPOT"), wait=wait, ttft=appdriver.shown_ms(page, "TTFT"),
                ttft_wait=ttft_wait, cpu=cpu)


def measure(config: str, rounds: int, model: str) -> dict:
    from playwright.sync_api import sync_playwright

    text = prompts.example("summarisation").text
    pages, clis = [], []
    with appdriver.dashboard(dict(TWO_BENDS_MODEL=model), kernels_ready_s=300) as (url, server), sync_playwright() as pw:
        browser = appdriver.launch(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url, timeout=300_000)
        appdriver.settle(page, 300_000)
        if CONFIGS[config]:
            page.get_by_text("Quiet timing (draw at the end)").click()
            appdriver.settle(page)
        page_once(page, server.pid)  # warm-up: excluded, like the CLI's own warm-up
        for r in range(rounds):
            pages.append(page_once(page, server.pid))
            clis.append(cli_once(text, model))
            p, c = pages[-1], clis[-1]
            print(f"  {config} round {r + 1}: page TPOT {p['tpot']:.1f} ms, wait {p['wait']}, TTFT {p['ttft']:.1f} ms, "
                  f"wait {p['ttft_wait']} | CLI TPOT {c['tpot']:.1f} ms, wait {c['wait']:.1f}, TTFT {c['ttft']:.1f} ms, "
                  f"wait {c['ttft_wait']:.1f} | CPU s per page run: "
                  + " ".join(f"{k} {v:.2f}" for k, v in p["cpu"].items()), flush=True)
        browser.close()
    med = lambda runs, key: statistics.median(r[key] or 0.0 for r in runs)  # noqa: E731
    return dict(config=config, page_tpot=med(pages, "tpot"), page_wait=med(pages, "wait"),
                page_net=statistics.median(p["tpot"] - (p["wait"] or 0.0) for p in pages),
                cli_tpot=med(clis, "tpot"), cli_wait=med(clis, "wait"),
                cli_net=statistics.median(c["tpot"] - c["wait"] for c in clis), page_ttft=med(pages, "ttft"),
                cli_ttft=med(clis, "ttft"), page_ttft_wait=med(pages, "ttft_wait"), cli_ttft_wait=med(clis, "ttft_wait"),
                waits_shown=sum(p["wait"] is not None for p in pages), rounds=rounds,
                cpu={k: statistics.median(p["cpu"][k] for p in pages) for k in CPU_OF})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--configs", default="defaults,quiet")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | load average {os.getloadavg()[0]:.2f} | {os.cpu_count()} CPUs | "
          f"{args.rounds} alternating rounds (page, CLI), medians | {args.model}, 64 -> 32 tokens")
    rows = [measure(c.strip(), args.rounds, args.model) for c in args.configs.split(",")]
    print(f"{'configuration':<10} {'page TPOT':>9} {'its wait':>8} {'page-wait':>9} {'CLI TPOT':>8} {'CLI wait':>8} "
          f"{'page/CLI':>8} {'(page-wait)/CLI':>15} {'both less their wait':>20}  TTFT: page (its wait) / CLI (its wait)")
    for r in rows:
        print(f"{r['config']:<10} {r['page_tpot']:>9.1f} {r['page_wait']:>8.1f} {r['page_net']:>9.1f} "
              f"{r['cli_tpot']:>8.1f} {r['cli_wait']:>8.1f} {r['page_tpot'] / r['cli_tpot']:>8.2f} "
              f"{r['page_net'] / r['cli_tpot']:>15.2f} {r['page_net'] / r['cli_net']:>20.2f}  "
              f"{r['page_ttft']:.1f} ({r['page_ttft_wait']:.1f}) / {r['cli_ttft']:.1f} ({r['cli_ttft_wait']:.1f}) = "
              f"{r['page_ttft'] / r['cli_ttft']:.2f}x   (wait shown in "
              f"{r['waits_shown']}/{r['rounds']} runs; CPU s per page run: "
              + " ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()) + ")")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
