"""Drive the real dashboard in headless Chromium: start `streamlit run app.py`, open sessions, press Run, read numbers.

Shared by the browser tests (tests/browser/) and the benchmarks that drive the page (benchmarks/disturbance.py,
benchmarks/loadtest.py, ...; run as `python -m benchmarks.NAME` from the checkout, so `tests` imports). Also starts and
stops an OpenAI-compatible server (ours or vLLM) and waits for its /health (benchmarks/bench_traffic.py and
tests/serving_helpers.py's vllm_server). Playwright drives Debian's Chromium; nothing is downloaded. The tests take
its headless shell where it is installed (browser_under_test(): the same Blink, without the full browser's processes;
a page load costs ~2.1 CPU-s in place of ~3.4, docs/decisions/headless-shell.md); the benchmarks keep the full
browser (CHROMIUM), as their recorded numbers were measured with it.
"""
from __future__ import annotations

import contextlib
import http.client
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
CHROMIUM = "/usr/bin/chromium"  # the full browser: what the benchmarks drive
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"  # Debian's chromium-headless-shell, installed by scripts/test.sh


def browser_under_test() -> str:
    """The browser the tests drive: TWO_BENDS_TEST_BROWSER if set, else the headless shell if installed, else CHROMIUM."""
    chosen = os.environ.get("TWO_BENDS_TEST_BROWSER")
    if chosen:
        return chosen
    return HEADLESS_SHELL if Path(HEADLESS_SHELL).exists() else CHROMIUM


BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]


# A port is chosen here and bound by the server later (vLLM binds it ~10 s after it starts). Chosen by binding port 0,
# a port came from the kernel's ephemeral range, which another test process choosing at the same time could be handed
# too: a fresh clone's vLLM found its port taken by the other worker's dashboard. So each test process takes its ports
# from a range of its own below the ephemeral range (32768 up, where bind(0) and outgoing connections draw from): the
# xdist workers gw0, gw1, ... and a process outside xdist (the fallbacks' run beside part 1) never share one.
PORT_BASE, PORT_SPAN, PORT_RANGES = 20_000, 2_400, 5
_given: set[int] = set()  # the ports this process handed out already


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, from this test process's own range, not handed out before."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...; "" outside xdist
    index = int(worker[2:]) + 1 if worker[2:].isdigit() else 0
    start = PORT_BASE + (index % PORT_RANGES) * PORT_SPAN
    for port in random.sample(range(start, start + PORT_SPAN), PORT_SPAN):
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port left in {start}-{start + PORT_SPAN - 1}")


def wait_for_port(port: int, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"streamlit did not open port {port} within {seconds:.0f} s")


# the worker's terminal line once a model runs on its final backends: fast kernels prepacked and its decode step
# built or compiled (or judged not worth it) in the background, or a model loaded without background work
KERNELS_FINAL = ("[two-bends] model ready",)  # model_pool.READY (not imported: that would import torch)


def wait_for_kernels(events: Path, seconds: float) -> float | None:
    """Seconds until the worker's final kernels are in place (its terminal output says so), None after `seconds`.

    A measurement started before that would time a run on stand-in kernels (plain weights, or the eager decode step
    while the compiled one is still compiling: 30 vs 48 ms a step on a 2-vCPU AVX2 machine, where the compile
    takes ~15 s of each start) beside the compile itself, and compare it with a CLI run on the final ones."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        text = events.read_text() if events.exists() else ""
        if any(event in text for event in KERNELS_FINAL):
            return time.monotonic() - began
        time.sleep(0.25)
    return None


@contextlib.contextmanager
def dashboard(env: dict | None = None, log_path: Path | None = None, kernels_ready_s: float = 0.0):
    """A running dashboard (yields its URL and the server process); stopped afterwards.

    kernels_ready_s > 0: also wait (up to that many seconds) until the worker's background kernels are final, so a
    measurement does not start on stand-ins; says so when they were not final in time."""
    port = free_port()
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    events = None  # a temporary terminal log, when the caller keeps none but waits for the ready line
    if kernels_ready_s > 0 and log_path is None:
        fd, name = tempfile.mkstemp(prefix="two_bends_terminal_", suffix=".log")
        os.close(fd)
        log_path = events = Path(name)
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "ui.controls.launch", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, 120)
        if kernels_ready_s > 0:
            took = wait_for_kernels(Path(log_path), kernels_ready_s)
            print(f"# the worker's final kernels were in place {took:.1f} s after the port opened" if took is not None
                  else f"# the worker's kernels were still not final after {kernels_ready_s:.0f} s: measuring anyway "
                       "(the page's runs say which kernels they used)", flush=True)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop_server(proc, grace_s=15)
        if log is not subprocess.DEVNULL:
            log.close()
        if events is not None:
            events.unlink(missing_ok=True)


class ServerDidNotStart(RuntimeError):
    """A server that exited during start-up (`code`: its exit code) or never answered /health (`code` None)."""

    def __init__(self, message: str, code: int | None):
        super().__init__(message)
        self.code = code


def healthy(port: int) -> bool:
    """True when 127.0.0.1:port answers GET /health with 200."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False


def start_server(cmd: list[str], port: int, log_path: Path, timeout: float, env: dict | None = None) -> subprocess.Popen:
    """Start a server (`cmd`, in its own process group, output to log_path) and wait until /health answers 200.

    Raises ServerDidNotStart, with the server stopped, when it exits first or `timeout` seconds pass."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    began = time.monotonic()
    while not healthy(port):
        if proc.poll() is not None:
            raise ServerDidNotStart(f"exited during start-up (code {proc.returncode})", proc.returncode)
        if time.monotonic() - began > timeout:
            stop_server(proc)
            raise ServerDidNotStart(f"did not answer /health within {timeout:.0f} s", None)
        time.sleep(0.25)  # a started server is used the moment it answers
    return proc


def stop_server(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s` seconds: to the server's whole process group when it leads one (started
    with start_new_session: its engine worker and other children go with it), else to the process alone."""
    if proc.poll() is not None:
        return
    try:
        group = os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return
    send = (lambda sig: os.killpg(proc.pid, sig)) if group else proc.send_signal
    send(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait(10)


def need_browser():
    """Playwright's sync API, or the test skipped saying why (Chromium or Playwright missing)."""
    import pytest

    if not Path(browser_under_test()).exists():
        pytest.skip(f"{browser_under_test()} is missing (the test command installs Debian's chromium and its headless "
                    "shell); browser test skipped")
    return pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


def launch(playwright, executable: str | None = None):
    """Chromium, headless (the tests' browser unless `executable` names another: the benchmarks pass CHROMIUM)."""
    browser = playwright.chromium.launch(executable_path=executable or browser_under_test(), args=BROWSER_ARGS)
    keep_normal_priority()
    return browser


_watching = threading.Event()  # set once this process's watcher runs: one is enough for every browser it launches


def keep_normal_priority(every_s: float = 1.0) -> None:
    """normal_priority() now and every second after (Chromium starts its GPU process when a page first draws), in one
    thread per process however many browsers it launches (each pass reads every process's name)."""
    normal_priority()
    if _watching.is_set():
        return
    _watching.set()

    def watch() -> None:
        while True:
            time.sleep(every_s)
            normal_priority()

    threading.Thread(target=watch, name="chromium-priority", daemon=True).start()


def _processes():
    """/proc/<pid> of every live process (read each entry under try: it may be gone by then)."""
    return (entry for entry in Path("/proc").iterdir() if entry.name.isdigit())


def normal_priority() -> None:
    """Put Chromium's processes back at nice 0. Run as root (as here), Chromium raises its browser and GPU
    processes to nice -8, ahead of the engine worker; a student's or instructor's browser, run as a normal
    user, cannot, so a measurement with root's Chromium would blame the dashboard for CPU it never takes."""
    for entry in _processes():
        try:
            if "chromium" in (entry / "comm").read_text() and os.getpriority(os.PRIO_PROCESS, int(entry.name)) < 0:
                os.setpriority(os.PRIO_PROCESS, int(entry.name), 0)
        except OSError:  # gone, or not ours to change
            continue


def settle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the app is rendered and no script run is in progress."""
    time.sleep(0.7)  # a rerun's "running" indicator appears after a short delay
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector(\"[data-testid='stStatusWidget']\")", timeout=timeout_ms)


def open_page(page, name: str, timeout_s: float = 120.0) -> None:
    """Click the sidebar navigation's link `name`, unfolding a long navigation ("View N more") first, and again when a
    rerun folded it back meanwhile (the link then leaves the DOM: one try's click would wait for it in vain)."""
    nav = page.locator("[data-testid='stSidebarNav']")
    deadline = time.monotonic() + timeout_s
    while True:
        link = nav.get_by_role("link", name=name)
        if link.count() == 0:
            more = page.locator("[data-testid='stSidebarNavViewButton']")
            if more.count() and "more" in more.first.inner_text():
                more.first.click()
        try:
            link.first.click(timeout=5_000)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError, or the link detached while clicking
            if time.monotonic() > deadline:
                raise


def join_room(browser, url: str, code: str, viewport: tuple[int, int] = (1280, 900), timeout_ms: int = 240_000,
              settle_ms: int = 120_000):
    """A new session (a browser context of its own) that opened a room-mode dashboard and joined it with `code`,
    its first page rendered and settled."""
    page = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}).new_page()
    page.goto(url, timeout=timeout_ms, wait_until="commit")
    field = page.get_by_label("Room code (on the projector)")
    field.wait_for(timeout=timeout_ms)
    field.fill(code)
    page.get_by_role("button", name="Join").click()
    page.locator("[data-testid='stSidebarNav']").wait_for(timeout=timeout_ms)
    settle(page, settle_ms)
    return page


def exception_text(page) -> str | None:
    errors = page.locator("[data-testid='stException']")
    return errors.first.inner_text()[:500] if errors.count() else None


def press_run(page) -> None:
    page.locator("[data-testid='stSidebar']").get_by_role("button", name="Run", exact=True).click()


def wait_for_result(page, timeout_ms: int) -> None:
    # the metric, not a chart legend with the same words (the live chart's, hidden once its panel collapses)
    page.locator("[data-testid='stMetric']").filter(has_text="TTFT (prefill)").first.wait_for(timeout=timeout_ms)
    page.get_by_text("The generated text").first.wait_for(timeout=timeout_ms)
    settle(page, timeout_ms)
    refused = page.locator("[data-testid='stAlert']").filter(has_text="Cannot run:")
    if refused.count():  # the metrics on the page are an earlier run's: never read them as this one's
        raise RuntimeError(f"the page refused the run: {refused.first.inner_text()}")


def shown_ms(page, label: str) -> float:
    """The number of milliseconds a metric (by its label) shows, e.g. 'TPOT (decode)' -> 37.2."""
    text = page.locator("[data-testid='stMetric']").filter(has_text=label).first.inner_text()
    match = re.search(r"([\d,]+(?:\.\d+)?)\s*ms", text)
    if not match:
        raise ValueError(f"no milliseconds in the {label!r} metric: {text!r}")
    return float(match.group(1).replace(",", ""))


def rss_bytes(pid: int, children: bool = True) -> int:
    """Resident memory of a process and (unless children=False) all its descendants (the engine worker), from /proc."""
    total = 0
    for p in [pid, *(descendants(pid) if children else [])]:
        try:
            total += next((int(line.split()[1]) * 1024 for line in open(f"/proc/{p}/status") if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: the children of each of its threads, theirs, and so on."""
    found, todo = [], [pid]
    while todo:
        try:
            kids = [int(c) for t in Path(f"/proc/{todo.pop()}/task").iterdir() for c in (t / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        found += kids
        todo += kids
    return found
