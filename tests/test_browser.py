"""Real-browser end-to-end test: `streamlit run app.py`, headless Chromium, press Run, visit every page.

Uses the real bundled SmolLM2 (TWO_BENDS_MODEL=smollm2-135m). Screenshots go to artifacts/screenshots/.
"""
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "artifacts" / "screenshots"
RUN_TIMEOUT_MS = 300_000  # generous: a default run takes a few seconds, but CI machines can be very busy

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"streamlit did not open port {port} within {seconds:.0f} s")


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (the test command installs Debian's chromium); browser test skipped")
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    port = _free_port()
    model = os.environ.get("TWO_BENDS_BROWSER_MODEL", "smollm2-135m")  # the real model unless overridden for a quick look
    env = dict(os.environ, TWO_BENDS_MODEL=model, PYTHONUNBUFFERED="1")
    log = open(ROOT / "artifacts" / "streamlit-browser-test.log", "w") if (ROOT / "artifacts").exists() else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, 120)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if log is not subprocess.DEVNULL:
            log.close()


def _settle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the app is rendered and no script run is in progress."""
    time.sleep(0.7)  # a rerun's "running" indicator appears after a short delay
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector(\"[data-testid='stStatusWidget']\")", timeout=timeout_ms)


def _assert_no_exception(page, where: str) -> None:
    errors = page.locator("[data-testid='stException']")
    assert errors.count() == 0, f"Streamlit exception on {where}: {errors.first.inner_text()[:500]}"


def test_run_then_visit_every_page(server):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(server, timeout=120_000)
            _settle(page)
            page.get_by_text("Press Run in the sidebar").first.wait_for(timeout=120_000)  # call to action before any run
            _assert_no_exception(page, "home before Run")
            page.screenshot(path=str(SHOTS / "00-home-before-run.png"), full_page=True)

            page.locator("[data-testid='stSidebar']").get_by_role("button", name="Run", exact=True).click()
            page.get_by_text("TTFT (prefill)").first.wait_for(timeout=RUN_TIMEOUT_MS)
            page.get_by_text("The generated text").first.wait_for(timeout=RUN_TIMEOUT_MS)
            _settle(page, RUN_TIMEOUT_MS)
            metric = page.locator("[data-testid='stMetric']").filter(has_text="TTFT").first
            assert re.search(r"\d+(\.\d+)?\s*ms", metric.inner_text()), metric.inner_text()
            _assert_no_exception(page, "home after Run")
            page.screenshot(path=str(SHOTS / "01-home-after-run.png"), full_page=True)

            links = page.locator("[data-testid='stSidebarNav'] a")
            hrefs = list(dict.fromkeys(filter(None, (links.nth(i).get_attribute("href") for i in range(links.count())))))
            assert len(hrefs) >= 4, hrefs
            for i, href in enumerate(hrefs, start=2):
                # click the link (client-side navigation keeps the session, and with it the last run)
                page.locator(f"[data-testid='stSidebarNav'] a[href='{href}']").first.click()
                _settle(page)
                time.sleep(1.0)  # let charts finish drawing before the screenshot
                name = re.sub(r"\W+", "_", href.rstrip("/").rsplit("/", 1)[-1] or "home")[:40]
                _assert_no_exception(page, name)
                page.screenshot(path=str(SHOTS / f"{i:02d}-{name}.png"), full_page=True)
            assert len(list(SHOTS.glob("*.png"))) >= len(hrefs) + 2
        finally:
            browser.close()
