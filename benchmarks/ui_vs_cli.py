"""Does the dashboard disturb what it measures? The same request, shown by the page and printed by the CLI.

Starts the real dashboard (headless Chromium drives it) and alternates, round after round:
  the page:  press Run with the default request (64 prompt tokens -> 32, greedy), read TTFT and TPOT off Home;
  the CLI:   `python -m engine generate` with the same 64 prompt tokens and 32 new tokens, --json.
Both exclude warm-up (one unmeasured run first). Prints medians and the ratio page / CLI for each
configuration asked for (live chart on/off, worker process/thread), and `worker-alone`: the same request sent
by this script straight to the engine worker (no Streamlit, no browser), which separates the page's share from
the worker's. Also CPU seconds per page run of the browser, Streamlit and the worker. A benchmark, not a test:
machines are noisy.

Usage: .venv/bin/python -m benchmarks.ui_vs_cli [--rounds 5] [--configs process-live,process-nochart,worker-alone]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from engine.core.metrics import summarize
from engine.core.trace import Trace
from engine.loading.model_store import DEFAULT_MODEL
from tests.browser import appdriver
from ui.text import prompts

CONFIGS = {  # name: (worker transport, live chart on)
    "process-live": ("process", True),
    "process-nochart": ("process", False),
    "thread-live": ("thread", True),
    "thread-nochart": ("thread", False),
    "worker-alone": ("process", None),  # no Streamlit, no browser: the request sent straight to the engine worker
}


THREADS = 0  # --model-threads: the dashboard's worker and the CLI both (0 = every core)


def cli_once(text: str, model: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", text, "--prompt-tokens", "64",
                          "--max-new-tokens", "32", "--model", model, "--json", "--threads", str(THREADS)],
                         capture_output=True, text=True, check=True, cwd=appdriver.ROOT)
    s = summarize(Trace.from_json(out.stdout))
    return s.ttft_s * 1000, s.tpot_s * 1000


CPU_OF = {"browser": "chromium", "streamlit": "ui.controls.launch", "worker": "engine.serving.scheduling.worker"}


def page_once(page) -> tuple[float, float, dict]:
    """(TTFT, TPOT the page showed, CPU seconds each process group used from Run to the drawn result)."""
    before = {k: appdriver.cpu_seconds(v) for k, v in CPU_OF.items()}
    appdriver.press_run(page)
    time.sleep(0.5)
    appdriver.wait_for_result(page, 600_000)
    cpu = {k: appdriver.cpu_seconds(v) - before[k] for k, v in CPU_OF.items()}
    return appdriver.shown_ms(page, "TTFT"), appdriver.shown_ms(page, "TPOT"), cpu


def measure_worker_alone(rounds: int, model: str) -> dict:
    """The page's request (the same ids, attention capture on) sent to the engine worker by this script."""
    import engine
    from engine.core.prompting import fit_prompt_to_tokens
    from engine.serving.scheduling.work import ModelSpec, Request, result_of
    from engine.serving.scheduling.worker import ProcessService, ServiceOptions

    text = prompts.example("summarisation").text
    spec = ModelSpec(model, "auto", "float32")
    service = ProcessService(ServiceOptions(preload=spec, threads=THREADS))
    ids = fit_prompt_to_tokens(engine.load_model(model).tokenizer, text, 64).ids

    def worker_once() -> tuple[float, float, dict]:
        before = appdriver.cpu_seconds(CPU_OF["worker"])
        trace = result_of(service.submit(Request(model=spec, prompt_ids=list(ids), max_new_tokens=32,
                                                 params=engine.SamplingParams(ignore_eos=True),
                                                 capture_attention=True)), timeout=600)
        s = summarize(trace)
        return s.ttft_s * 1000, s.tpot_s * 1000, {"worker": appdriver.cpu_seconds(CPU_OF["worker"]) - before}

    runs, cli_runs = [], []
    try:
        worker_once()  # warm-up: excluded
        for r in range(rounds):
            runs.append(worker_once())
            cli_runs.append(cli_once(text, model))
            print(f"  worker-alone round {r + 1}: worker TTFT {runs[-1][0]:.1f} TPOT {runs[-1][1]:.1f} | "
                  f"CLI TTFT {cli_runs[-1][0]:.1f} TPOT {cli_runs[-1][1]:.1f} ms", flush=True)
    finally:
        service.close()
    return summary("worker-alone", runs, cli_runs)


def summary(config: str, page_runs: list, cli_runs: list) -> dict:
    med = lambda runs, i: statistics.median(r[i] for r in runs)  # noqa: E731
    return dict(config=config, page_ttft=med(page_runs, 0), page_tpot=med(page_runs, 1),
                cli_ttft=med(cli_runs, 0), cli_tpot=med(cli_runs, 1),
                cpu={k: statistics.median(r[2][k] for r in page_runs) for k in page_runs[0][2]})


def measure(config: str, rounds: int, model: str) -> dict:
    from playwright.sync_api import sync_playwright

    if config == "worker-alone":
        return measure_worker_alone(rounds, model)
    transport, live = CONFIGS[config]
    text = prompts.example("summarisation").text
    env = dict(TWO_BENDS_MODEL=model, TWO_BENDS_WORKER=transport, TWO_BENDS_THREADS=str(THREADS))
    page_runs, cli_runs = [], []
    with appdriver.dashboard(env, kernels_ready_s=300) as (url, _), sync_playwright() as pw:
        browser = appdriver.launch(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url, timeout=300_000)
        appdriver.settle(page, 300_000)
        if not live:
            page.get_by_text("Live latency chart during generation").click()
            appdriver.settle(page)
        page_once(page)  # warm-up: excluded, like the CLI's own warm-up
        for r in range(rounds):
            page_runs.append(page_once(page))
            cli_runs.append(cli_once(text, model))
            cpu = " ".join(f"{k} {v:.2f}" for k, v in page_runs[-1][2].items())
            print(f"  {config} round {r + 1}: page TTFT {page_runs[-1][0]:.1f} TPOT {page_runs[-1][1]:.1f} | "
                  f"CLI TTFT {cli_runs[-1][0]:.1f} TPOT {cli_runs[-1][1]:.1f} ms | CPU s per page run: {cpu}", flush=True)
        browser.close()
    return summary(config, page_runs, cli_runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default="process-live,process-nochart,thread-live")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--model-threads", type=int, default=0,
                    help="torch threads for the model in the dashboard and the CLI alike (default 0: every core)")
    args = ap.parse_args()
    global THREADS
    THREADS = args.model_threads
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | load average {os.getloadavg()[0]:.2f} | {os.cpu_count()} CPUs | "
          f"{args.rounds} alternating rounds, medians | model threads {THREADS or 'every core'}")
    rows = [measure(c.strip(), args.rounds, args.model) for c in args.configs.split(",")]
    print(f"{'configuration':<18} {'page TTFT':>10} {'CLI TTFT':>9} {'ratio':>6}   {'page TPOT':>10} {'CLI TPOT':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['config']:<18} {r['page_ttft']:>10.1f} {r['cli_ttft']:>9.1f} {r['page_ttft'] / r['cli_ttft']:>6.2f}   "
              f"{r['page_tpot']:>10.1f} {r['cli_tpot']:>9.1f} {r['page_tpot'] / r['cli_tpot']:>6.2f}   "
              "CPU s per page run: " + " ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()))
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
