"""How much does the page disturb what it measures, and does its stated CPU wait account for it? Page vs CLI.

Starts the real dashboard (headless Chromium on the same cores drives it) and alternates, round after round:
  the page:  press Run with the default request (64 prompt tokens -> 32, greedy), read the TTFT and TPOT Home shows
             and the CPU wait the run panel states ("waited N ms per token for a CPU", engine/host/cpu_wait.py);
  the CLI:   `python -m engine generate --json` for the same 64 prompt tokens and 32 new tokens: its TPOT and wait.
Each configuration starts its own dashboard: `defaults` (live chart and streamed text on), `quiet` (Quiet timing:
nothing drawn while the model runs), `nochart` (live latency chart off), `thread` and `thread-nochart` (the engine
in a thread of Streamlit's process, not a worker process), and `worker-alone`: the page's request sent by this script
straight to an engine worker (no Streamlit, no browser), which separates the page's share from the worker's.
Prints medians and the ratios page / CLI and (page - its wait) / CLI (the target: one of them <= 1.15 with
defaults), and the CPU seconds the browser, Streamlit and the worker used per page run. A benchmark, not a test:
run it alone (`flock /tmp/tb/bench.lock ...` on a shared machine).

Usage: .venv/bin/python -m benchmarks.disturbance [--rounds 4] [--configs defaults,quiet,worker-alone] [--json]
                                                   [--model-threads N]
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

from benchmarks._servers import cpu_s
from engine.core.metrics import summarize
from engine.core.trace import Trace
from engine.loading.model_store import DEFAULT_MODEL
from tests.browser import appdriver
from ui.text import prompts

CONFIGS = {  # name: (the engine's place, TWO_BENDS_WORKER; the sidebar switch turned before measuring)
    "defaults": (None, None),
    "quiet": (None, "Quiet timing (draw at the end)"),
    "nochart": (None, "Live latency chart during generation"),
    "thread": ("thread", None),
    "thread-nochart": ("thread", "Live latency chart during generation"),
    "worker-alone": None,  # no Streamlit, no browser: the request sent straight to an engine worker
}
CPU_OF = {"browser": "chromium", "streamlit": "ui.controls.launch", "worker": "engine.serving.scheduling.worker"}
WAIT = re.compile(r"waited for a CPU ([\d,]+(?:\.\d+)?) ms per token, ([\d,]+(?:\.\d+)?) ms in prefill")


def tree_cpu(root: int, name_part: str) -> float:
    """CPU seconds (user + system) of `root` and its descendants whose command line holds `name_part`: only this
    script's own dashboard and browser, never another user's on a shared machine."""
    return sum(cpu_s(pid) for pid in [root, *appdriver.descendants(root)] if name_part in command_line(pid))


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def numbers(trace: Trace) -> dict:
    """TTFT, TPOT and the CPU waits a trace recorded, in ms (the wait per token None where none was measured)."""
    measured = trace.steps and trace.cpu_wait_seconds is not None
    wait = trace.decode_cpu_wait_seconds / len(trace.steps) * 1e3 if measured else None
    return dict(tpot=summarize(trace).tpot_s * 1e3, wait=wait, ttft=trace.prefill_seconds * 1e3,
                ttft_wait=(trace.prefill_cpu_wait_seconds or 0.0) * 1e3)


def cli_once(text: str, args) -> dict:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", text, "--prompt-tokens", "64",
                          "--max-new-tokens", "32", "--model", args.model, "--json", "--threads", str(args.model_threads)],
                         capture_output=True, text=True, check=True, cwd=appdriver.ROOT)
    return numbers(Trace.from_json(out.stdout))


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


def worker_runs(rounds: int, args, text: str, cli_runs: list) -> list[dict]:
    """The page's request (the same ids, attention capture on) sent to an engine worker by this script."""
    import engine
    from engine.core.prompting import fit_prompt_to_tokens
    from engine.serving.scheduling.work import ModelSpec, Request, result_of
    from engine.serving.scheduling.worker import ProcessService, ServiceOptions

    spec = ModelSpec(args.model, "auto", "float32")
    service = ProcessService(ServiceOptions(preload=spec, threads=args.model_threads))
    ids = fit_prompt_to_tokens(engine.load_model(args.model).tokenizer, text, 64).ids

    def once() -> dict:
        before = tree_cpu(os.getpid(), CPU_OF["worker"])
        trace = result_of(service.submit(Request(model=spec, prompt_ids=list(ids), max_new_tokens=32,
                                                 params=engine.SamplingParams(ignore_eos=True),
                                                 capture_attention=True)), timeout=600)
        return dict(numbers(trace), cpu={"worker": tree_cpu(os.getpid(), CPU_OF["worker"]) - before})

    try:
        once()  # warm-up: excluded, like the CLI's own warm-up
        return [alternate(once, r, "worker-alone", text, args, cli_runs) for r in range(rounds)]
    finally:
        service.close()


def alternate(run_once, r: int, config: str, text: str, args, cli_runs: list) -> dict:
    """One round: the page (or the worker) and then the CLI, both printed."""
    p = run_once()
    cli_runs.append(cli_once(text, args))
    c = cli_runs[-1]
    ms = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731 - a wait not stated
    print(f"  {config} round {r + 1}: page TPOT {p['tpot']:.1f} ms, wait {ms(p['wait'])}, TTFT {p['ttft']:.1f} ms, "
          f"wait {ms(p['ttft_wait'])} | CLI TPOT {c['tpot']:.1f} ms, wait {ms(c['wait'])}, TTFT {c['ttft']:.1f} ms, "
          f"wait {c['ttft_wait']:.1f} | CPU s per page run: "
          + " ".join(f"{k} {v:.2f}" for k, v in p["cpu"].items()), flush=True)
    return p


def measure(config: str, args) -> dict:
    from playwright.sync_api import sync_playwright

    text = prompts.example("summarisation").text
    clis: list[dict] = []
    if CONFIGS[config] is None:
        pages = worker_runs(args.rounds, args, text, clis)
    else:
        worker, switch = CONFIGS[config]
        env = dict(TWO_BENDS_MODEL=args.model, TWO_BENDS_THREADS=str(args.model_threads))
        if worker:
            env["TWO_BENDS_WORKER"] = worker
        with appdriver.dashboard(env, kernels_ready_s=300) as (url, server), sync_playwright() as pw:
            browser = appdriver.launch(pw, appdriver.CHROMIUM)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url, timeout=300_000)
            appdriver.settle(page, 300_000)
            if switch:
                page.get_by_text(switch).click()
                appdriver.settle(page)
            page_once(page, server.pid)  # warm-up: excluded, like the CLI's own warm-up
            pages = [alternate(lambda: page_once(page, server.pid), r, config, text, args, clis)
                     for r in range(args.rounds)]
            browser.close()
    med = lambda runs, key: statistics.median(r[key] or 0.0 for r in runs)  # noqa: E731
    return dict(config=config, page_tpot=med(pages, "tpot"), page_wait=med(pages, "wait"),
                page_net=statistics.median(p["tpot"] - (p["wait"] or 0.0) for p in pages),
                cli_tpot=med(clis, "tpot"), cli_wait=med(clis, "wait"),
                cli_net=statistics.median(c["tpot"] - (c["wait"] or 0.0) for c in clis), page_ttft=med(pages, "ttft"),
                cli_ttft=med(clis, "ttft"), page_ttft_wait=med(pages, "ttft_wait"), cli_ttft_wait=med(clis, "ttft_wait"),
                waits_shown=sum(p["wait"] is not None for p in pages), rounds=args.rounds,
                cpu={k: statistics.median(p["cpu"][k] for p in pages) for k in pages[0]["cpu"]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--configs", default="defaults,quiet", help="comma-separated: " + ", ".join(CONFIGS))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--model-threads", type=int, default=0,
                    help="torch threads for the model in the dashboard and the CLI alike (default 0: every core)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    configs = [c.strip() for c in args.configs.split(",")]
    if unknown := [c for c in configs if c not in CONFIGS]:
        ap.error(f"unknown configuration {', '.join(unknown)}: choose from {', '.join(CONFIGS)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | load average {os.getloadavg()[0]:.2f} | {os.cpu_count()} CPUs | "
          f"{args.rounds} alternating rounds (page, CLI), medians | {args.model}, 64 -> 32 tokens | model threads "
          f"{args.model_threads or 'every core'}")
    rows = [measure(c, args) for c in configs]
    print(f"{'configuration':<14} {'page TPOT':>9} {'its wait':>8} {'page-wait':>9} {'CLI TPOT':>8} {'CLI wait':>8} "
          f"{'page/CLI':>8} {'(page-wait)/CLI':>15} {'both less their wait':>20}  TTFT: page (its wait) / CLI (its wait)")
    for r in rows:
        print(f"{r['config']:<14} {r['page_tpot']:>9.1f} {r['page_wait']:>8.1f} {r['page_net']:>9.1f} "
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
