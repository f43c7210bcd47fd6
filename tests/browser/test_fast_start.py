"""The launcher's fast start, in a real browser: the engine worker it spawns before Streamlit is the one the page
uses (one worker process, not two), and a run through it completes. The app runs the tiny random Llama."""
from pathlib import Path

from tests.browser import appdriver

RUN_TIMEOUT_MS = 300_000


def _workers_of(pid: int) -> list[int]:
    """Engine worker processes among the server's children."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children
            if b"engine.serving.scheduling.worker" in Path(f"/proc/{c}/cmdline").read_bytes()]


def test_the_early_worker_serves_the_page():
    sync_api = appdriver.need_browser()
    env = {"TWO_BENDS_MODEL": "tiny-llama", "TWO_BENDS_WORKER": "process", "TWO_BENDS_THREADS": "1"}
    with appdriver.dashboard(env) as (url, server), sync_api.sync_playwright() as pw:
        early = _workers_of(server.pid)
        assert len(early) == 1  # spawned by the launcher before any page asked for it
        browser = appdriver.launch(pw)
        page = browser.new_page()
        page.goto(url)
        appdriver.settle(page)
        appdriver.press_run(page)
        appdriver.wait_for_result(page, RUN_TIMEOUT_MS)
        assert appdriver.exception_text(page) is None
        assert _workers_of(server.pid) == early  # the page adopted it: no second worker
        browser.close()
