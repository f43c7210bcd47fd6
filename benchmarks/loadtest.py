"""A class on one server, for real: N headless Chromium sessions against the real dashboard, and its memory.

  room    N sessions (default 30), each pressing Run `--runs` times with mixed prompt/output lengths, in the
          scheduling mode(s) asked for. Pass = 0 errors, no exception element on any page, every run finished.
          Prints p50/p99 queue wait and run time, the TPOT pages showed vs a quiet CLI run, and server RSS.
  memory  The memory targets: RSS kept per session after a default run and after a 1024-token run, the
          transient of one 1024 -> 512 run, and RSS 30 s after every session closed vs after warm-up.
  engine  No browsers: N default requests (64 -> 32) submitted at once to the scheduler, queue mode then
          batch mode, taking turns: the room's tokens/s and each request's TPOT (what the engine alone can take).

Usage: .venv/bin/python -m benchmarks.loadtest room --sessions 30 --runs 3 --modes queue,batch  (queue-fixed: queue mode, --fixed-threads)
       .venv/bin/python -m benchmarks.loadtest memory
       .venv/bin/python -m benchmarks.loadtest engine --requests 8 --rounds 2
A measurement, not a test: its numbers are in docs/teacher-guide.md ("What one machine holds").
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import threading
import time

from benchmarks._browser import FINISHED, finished, settle
from tests.browser import appdriver

MIXES = [(64, 32), (256, 16), (16, 64), (128, 32), (512, 8), (32, 48)]  # (prompt tokens, output tokens)
MIB = 2**20


async def one_run(page, url: str, n_prompt: int, n_out: int, timeout_ms: int) -> dict:
    # the lengths through a shareable link (ui/demo/links.py): moving the sliders key by key made each of 30
    # browsers rerun the page hundreds of times, and the harness, not the engine, set the pace
    await page.goto(f"{url}/?prompt_tokens={n_prompt}&output_tokens={n_out}", timeout=timeout_ms)
    await settle(page, timeout_ms)
    start = time.perf_counter()
    await page.locator("[data-testid='stSidebar']").get_by_role("button", name="Run", exact=True).click()
    await asyncio.sleep(0.5)
    await page.get_by_text(FINISHED).first.wait_for(timeout=timeout_ms)
    await settle(page, timeout_ms)
    wall = time.perf_counter() - start
    errors = page.locator("[data-testid='stException']")
    return dict(await finished(page), wall_s=wall,
                error=(await errors.first.inner_text())[:300] if await errors.count() else None)


async def session(browser, url: str, index: int, runs: int, results: list, errors: list, timeout_ms: int,
                  delay: float) -> None:
    await asyncio.sleep(delay)
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(timeout_ms)  # a busy room makes every click slow; only the run timeout should fail it
    try:
        page = await context.new_page()
        await page.goto(url, timeout=timeout_ms)
        await settle(page, timeout_ms)
        for r in range(runs):
            n_prompt, n_out = MIXES[(index + r) % len(MIXES)]
            result = await one_run(page, url, n_prompt, n_out, timeout_ms)
            results.append(result)
            if result["error"]:
                errors.append(f"session {index} run {r}: {result['error']}")
    except Exception as exc:  # a session that could not finish is a failure of the load test, not of the script
        errors.append(f"session {index}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    finally:
        await context.close()


async def sessions(url: str, args, results: list, errors: list) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=appdriver.CHROMIUM, args=appdriver.BROWSER_ARGS)
        appdriver.keep_normal_priority()
        await asyncio.gather(*(session(browser, url, i, args.runs, results, errors, args.timeout * 1000, i * args.stagger)
                               for i in range(args.sessions)))
        await browser.close()


def quiet_cli_tpot(model: str) -> float:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", "The relay road and the art of time",
                          "--prompt-tokens", "64", "--max-new-tokens", "32", "--model", model],
                         capture_output=True, text=True, check=True, cwd=appdriver.ROOT)
    return float(re.search(r"TPOT\s+([\d.]+) ms", out.stdout).group(1))


class PeakRSS:
    """Samples a process tree's RSS in the background while it is entered; `.peak` holds the maximum seen."""

    def __init__(self, pid: int, every_s: float = 0.3):
        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, appdriver.rss_bytes(self.pid))
            time.sleep(self.every_s)

    def __enter__(self) -> PeakRSS:
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


def pct(values: list[float], q: float) -> float:
    values = sorted(v for v in values if v is not None)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))] if values else float("nan")


def room(args) -> None:
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {os.cpu_count()} CPUs | load average {os.getloadavg()[0]:.2f} | "
          f"{args.sessions} sessions x {args.runs} runs | mixes {MIXES}")
    quiet = quiet_cli_tpot(args.model)
    print(f"# quiet CLI TPOT (64 -> 32, alone): {quiet:.1f} ms")
    for mode in args.modes.split(","):  # "queue-fixed": queue mode with every decode step on every core's thread
        env = dict(TWO_BENDS_MODEL=args.model, TWO_BENDS_MODE=mode.removesuffix("-fixed"),
                   TWO_BENDS_MAX_QUEUE=str(4 * args.sessions), TWO_BENDS_FIXED_THREADS="1" if mode.endswith("-fixed") else "")
        with appdriver.dashboard(env, kernels_ready_s=300) as (url, proc):
            results, errors = [], []
            start = time.perf_counter()
            with PeakRSS(proc.pid) as rss:
                asyncio.run(sessions(url, args, results, errors))
            elapsed = time.perf_counter() - start
        done = len(results)
        print(f"\n## mode {mode}: {done} of {args.sessions * args.runs} runs finished in {elapsed:.0f} s, "
              f"{len(errors)} errors, peak server RSS {rss.peak / MIB:,.0f} MiB")
        for e in errors[:10]:
            print(f"   error: {e}")
        for name, key, unit in (("queue wait", "queue_s", "s"), ("run time (TTFT + decode)", "total_s", "s"),
                                ("shown TPOT", "tpot_ms", "ms"), ("wall time per run", "wall_s", "s")):
            values = [r[key] for r in results]
            print(f"   {name:<26} p50 {pct(values, 50):8.2f} {unit}   p99 {pct(values, 99):8.2f} {unit}")
        tpots = [r["tpot_ms"] for r in results if r["tpot_ms"] is not None]
        if tpots:
            print(f"   shown TPOT / quiet CLI TPOT: median {statistics.median(tpots) / quiet:.2f}x")


def split(pid: int) -> str:
    own = appdriver.rss_bytes(pid, children=False)
    return f"[streamlit {own / MIB:,.0f} MiB, worker {(appdriver.rss_bytes(pid) - own) / MIB:,.0f} MiB]"


def memory(args) -> None:
    """Targets: default run <= 10 MB per session; 1024-token run <= 60 MB; 1024->512 transient <= +1 GB;
    30 s after every session closed, RSS within 10% of after warm-up."""
    from playwright.sync_api import sync_playwright

    env = dict(TWO_BENDS_MODEL=args.model)
    with appdriver.dashboard(env) as (url, proc), sync_playwright() as pw:
        browser = appdriver.launch(pw, appdriver.CHROMIUM)

        def new_session(n_prompt: int, n_out: int):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(f"{url}/?prompt_tokens={n_prompt}&output_tokens={n_out}", timeout=300_000)  # as in room()
            appdriver.settle(page, 300_000)
            appdriver.press_run(page)
            time.sleep(0.5)
            page.get_by_text(FINISHED).first.wait_for(timeout=900_000)
            appdriver.settle(page, 900_000)
            return context

        warm = new_session(64, 32)  # warm-up: the model loaded, first run done
        warm.close()
        time.sleep(10)
        base = appdriver.rss_bytes(proc.pid)
        print(f"# after warm-up: server RSS {base / MIB:,.0f} MiB (streamlit + engine worker) {split(proc.pid)}")
        rows = []
        for label, (n_prompt, n_out), count in (("default run 64 -> 32", (64, 32), args.sessions),
                                                 ("1024-token run 1024 -> 32", (1024, 32), 3)):
            before = appdriver.rss_bytes(proc.pid)
            contexts = [new_session(n_prompt, n_out) for _ in range(count)]
            time.sleep(3)
            kept = (appdriver.rss_bytes(proc.pid) - before) / count
            rows.append((label, kept))
            print(f"{label:<28} kept per session: {kept / MIB:7.1f} MiB ({count} sessions) {split(proc.pid)}")
            for c in contexts:
                c.close()
        before = appdriver.rss_bytes(proc.pid)
        with PeakRSS(proc.pid, 0.1) as rss:
            new_session(1024, 512).close()
        print(f"{'1024 -> 512 run':<28} transient: +{(rss.peak - before) / MIB:,.0f} MiB over {before / MIB:,.0f} MiB "
              f"{split(proc.pid)}")
        browser.close()
        time.sleep(30)
        after = appdriver.rss_bytes(proc.pid)
        print(f"30 s after every session closed: {after / MIB:,.0f} MiB = {after / base:.2f}x the level after warm-up "
              f"{split(proc.pid)}")


def engine_only(args) -> None:
    """The scheduler without the dashboard: what sharing the bridge does to the room's tokens/s and to each TPOT."""
    import engine
    from engine.serving.scheduling.work import ModelSpec

    spec, greedy = ModelSpec(args.model, "auto", "float32"), engine.SamplingParams(ignore_eos=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} | {os.cpu_count()} CPUs | load average {os.getloadavg()[0]:.2f} | "
          f"{args.requests} requests of 64 -> 32 tokens submitted at once, max batch {args.requests} | "
          f"{args.hogs} busy loop(s) beside")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        for _ in range(args.rounds):
            for mode in args.modes.split(","):
                engine_round(mode, spec, greedy, args.requests, 32, args.budget)
    finally:
        for hog in hogs:
            hog.kill()


def engine_round(mode: str, spec, greedy, n: int, n_out: int, budget: int | None = None) -> None:
    """One mode's n requests through a fresh scheduler ("batch-fixed": batch mode with --fixed-threads; `budget`:
    batch mode's chunked prefill, tokens per step)."""
    from engine.core.metrics import summarize
    from engine.core.prompting import fit_prompt_to_tokens
    from engine.serving.scheduling.lab_jobs import MODEL_DESCRIBE
    from engine.serving.scheduling.scheduler import Scheduler
    from engine.serving.scheduling.work import Job, Request, result_of
    from ui.text import prompts

    scheduler = Scheduler(mode.removesuffix("-fixed"), max_batch=n, adaptive_threads=not mode.endswith("-fixed"),
                          max_num_batched_tokens=budget if mode.startswith("batch") else None).start()
    try:
        info = result_of(scheduler.submit(Job(model=spec, name=MODEL_DESCRIBE.name, args=(spec,))), 600)  # loaded there
        ids = fit_prompt_to_tokens(info.tokenizer, prompts.example("summarisation").text, 64 + n).ids
        warm = result_of(scheduler.submit(Request(model=spec, prompt_ids=ids[:64], max_new_tokens=4, params=greedy)), 600)
        start = time.perf_counter()
        works = [scheduler.submit(Request(model=spec, prompt_ids=ids[i:i + 64], max_new_tokens=n_out, params=greedy))
                 for i in range(n)]  # different prompts of the same length
        traces = [result_of(w, 1800) for w in works]
        wall = time.perf_counter() - start
    finally:
        scheduler.stop()
    tpot = statistics.median(summarize(t).tpot_s * 1000 for t in traces)
    ttft = statistics.median(summarize(t).ttft_s * 1000 for t in traces)
    one = sum(s.threads == 1 for t in traces for s in t.steps) / max(sum(len(t.steps) for t in traces), 1)
    print(f"{mode:<11} {n} requests in {wall:5.1f} s = {n * n_out / wall:5.1f} tokens/s | TPOT median {tpot:6.1f} ms | "
          f"TTFT median {ttft:6.1f} ms | queue wait max {max(t.queue_seconds for t in traces):5.1f} s | "
          f"steps on 1 thread {one:.0%} | warm-up steps' threads {[s.threads for s in warm.steps]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("room")
    r.add_argument("--sessions", type=int, default=30)
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--modes", default="queue,batch")
    r.add_argument("--stagger", type=float, default=0.2, help="seconds between session starts")
    r.add_argument("--timeout", type=int, default=3600, help="seconds a run may take (queues are long)")
    m = sub.add_parser("memory")
    m.add_argument("--sessions", type=int, default=5)
    e = sub.add_parser("engine")
    e.add_argument("--requests", type=int, default=8)
    e.add_argument("--rounds", type=int, default=2)
    e.add_argument("--modes", default="queue,batch", help="queue, batch; -fixed after one: --fixed-threads")
    e.add_argument("--hogs", type=int, default=0, help="busy loops beside the engine (cores other programs hold)")
    e.add_argument("--budget", type=int, default=None, help="batch mode's chunked prefill: tokens per step")
    from engine.loading.model_store import DEFAULT_MODEL  # the dashboard's default (imports torch here, once)

    for p in (r, m, e):
        p.add_argument("--model", default=DEFAULT_MODEL)
    args = ap.parse_args()
    {"room": room, "memory": memory, "engine": engine_only}[args.what](args)


if __name__ == "__main__":
    main()
