"""How long from starting the dashboard to a usable Run button, moment by moment
(docs/decisions/fast-start.md).

Starts the server as scripts/dashboard.sh does (`python -m ui.controls.launch ...`, the converted model already
cached; `--full` runs `bash scripts/dashboard.sh` itself, with its set-up check and `engine prepare`), opens it in
headless Chromium (started first: a user's browser is already open) and waits until the sidebar's Run button is
there with the model described under it ("In use: ... kernels: ..."). Everything is measured from the outside:
the port opening, the first page drawn, the Run button usable, and the worker's terminal line saying the model runs
on its final backends (fast kernels prepacked, decode step built, in the background).

    .venv/bin/python -m benchmarks.startup_time [--rounds 3] [--full] [--model NAME] [--baseline DIR]
--baseline DIR: another checkout (e.g. `git archive` of an older commit, with its .venv link), measured in
alternate rounds with this one, so both see the same machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.loading.model_store import DEFAULT_MODEL  # torch-free: the start is not slowed
from tests.browser import appdriver

ROOT = Path(__file__).resolve().parent.parent

SIDEBAR_JS = """() => {
  const bar = document.querySelector("[data-testid='stSidebar']");
  return !!bar && bar.innerText.includes('Model');
}"""
RUN_READY_JS = """() => {
  const bar = document.querySelector("[data-testid='stSidebar']");
  if (!bar || !bar.innerText.includes('kernels:')) return false;
  return [...bar.querySelectorAll('button')].some(b => b.innerText.trim() === 'Run' && !b.disabled);
}"""
READY_LINE = "[two-bends] model ready"  # engine/serving/scheduling/model_pool.py's READY, in the terminal output
READY_WAIT_S = 90  # how long a round waits, after Run is usable, for the worker's final backends
READY_LABEL = "final backends in place (the worker's terminal line)"


def _watch_for(path: Path, text: str, start: float, found: dict, stop: threading.Event) -> None:
    """Record in found['t'] the seconds from `start` at which `text` first appears in the file (polled every 50 ms)."""
    while not stop.is_set():
        if path.exists() and text in path.read_text(errors="replace"):
            found["t"] = time.time() - start
            return
        time.sleep(0.05)


def one_round(args, browser, root: Path) -> dict[str, float]:
    port = appdriver.free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", TWO_BENDS_MODEL=args.model)
    streamlit_args = ["--server.headless", "true", "--server.port", str(port), "--browser.gatherUsageStats", "false",
                      "--server.fileWatcherType", "none"]
    if args.full:
        cmd = ["bash", "scripts/dashboard.sh", *streamlit_args]
    else:
        cmd = [str(root / ".venv/bin/python"), "-m", "ui.controls.launch", "--server.address", "127.0.0.1", *streamlit_args]
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    terminal = Path(f"/tmp/startup_time_{port}.log")
    out = open(terminal, "w")
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    ready: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_for, args=(terminal, READY_LINE, start, ready, stop), daemon=True)
    watcher.start()
    try:
        appdriver.wait_for_port(port, 120)
        times = {"port open (Streamlit serving)": time.time() - start}
        page.goto(f"http://127.0.0.1:{port}")
        page.wait_for_function(SIDEBAR_JS, timeout=180_000, polling=50)
        times["sidebar drawn (first script run)"] = time.time() - start
        page.wait_for_function(RUN_READY_JS, timeout=180_000, polling=50)
        times["Run button usable"] = time.time() - start
        kernels = page.locator("[data-testid='stSidebar']").get_by_text("kernels:").first.inner_text()
        watcher.join(READY_WAIT_S)  # the last of the worker's steps: its terminal line, not the page
    finally:
        stop.set()
        page.close()
        appdriver.stop_server(proc)
        out.close()
        terminal.unlink(missing_ok=True)
    if "t" in ready:
        times[READY_LABEL] = ready["t"]
    times["_kernels"] = kernels.split("kernels:")[-1].strip()
    return times


def report(args, rounds: list[dict], what: str) -> None:
    labels = ["port open (Streamlit serving)", "sidebar drawn (first script run)", "Run button usable", READY_LABEL]
    labels = sorted((lb for lb in labels if all(lb in r for r in rounds)), key=lambda lb: statistics.median(r[lb] for r in rounds))
    print(f"\n{what}: seconds from the start, {len(rounds)} rounds\n")
    print("| moment | median s | rounds |")
    print("|---|---:|---|")
    for label in labels:
        values = [r[label] for r in rounds]
        print(f"| {label} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    print(f"\nkernels shown in the sidebar when Run became usable: {', '.join(r['_kernels'] for r in rounds)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--full", action="store_true", help="run bash scripts/dashboard.sh (set-up check, engine prepare)")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--baseline", type=Path, action="append", default=[],
                   help="another checkout, measured in alternate rounds (may be given more than once)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write every round's moments (this checkout) as JSON")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    roots = [ROOT] + [b.resolve() for b in args.baseline]
    load_before = os.getloadavg()
    rounds: dict[Path, list[dict]] = {root: [] for root in roots}
    with sync_playwright() as pw:
        browser = appdriver.launch(pw, appdriver.CHROMIUM)
        for i in range(args.rounds):
            for root in roots:
                rounds[root].append(one_round(args, browser, root))
                print(f"round {i + 1} {root.name}: Run usable after {rounds[root][-1]['Run button usable']:.2f} s "
                      f"(kernels: {rounds[root][-1]['_kernels']})", file=sys.stderr, flush=True)
        browser.close()
    what = "bash scripts/dashboard.sh" if args.full else "python -m ui.controls.launch (dashboard.sh's last step)"
    print(f"From `{what}` to a usable Run button, {args.model}; load average before {load_before[0]:.2f}, "
          f"after {os.getloadavg()[0]:.2f}")
    for root in roots:
        report(args, rounds[root], f"checkout {root}")
    if args.json:  # seconds from the start per moment, each round (benchmarks/cpu_check.py reads "Run button usable")
        args.json.write_text(json.dumps(dict(what=what, model=args.model, rounds=rounds[ROOT]), indent=1))


if __name__ == "__main__":
    main()
