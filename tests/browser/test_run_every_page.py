"""Real-browser end-to-end tests: `streamlit run app.py` with the real bundled SmolLM2 (TWO_BENDS_MODEL=smollm2-135m)
in its default queue mode, started once for this file and the lesson's (tests/browser/shared.py): headless Chromium
presses Run and visits every page; then two students share the engine and one closes the tab mid-run. Screenshots go
to artifacts/screenshots/.
(Sessions sharing a batch-mode server: tests/browser/test_crowd.py.)
"""
import os
import re
import time

import pytest

from tests import ROOT
from tests.browser import appdriver, shared

SHOTS = ROOT / "artifacts" / "screenshots"
RUN_TIMEOUT_MS = 300_000  # generous: a default run takes a few seconds, but CI machines can be very busy
MODEL = os.environ.get("TWO_BENDS_BROWSER_MODEL", "smollm2-135m")  # the real model unless overridden for a quick look



def _no_exception(page, where: str) -> None:
    text = appdriver.exception_text(page)
    assert text is None, f"Streamlit exception on {where}: {text}"


@pytest.fixture
def dashboard():
    """(url, browser): the dashboard as a user's first start runs it (shared.users_dashboard), and Chromium, both
    shared with the lesson's test (tests/browser/shared.py)."""
    return shared.users_dashboard(MODEL), shared.browser()


def test_run_then_visit_every_page(dashboard):
    url, browser = dashboard
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url, timeout=120_000)
    appdriver.settle(page)
    page.get_by_text("Press Run in the sidebar").first.wait_for(timeout=120_000)  # call to action before any run
    _no_exception(page, "home before Run")
    page.screenshot(path=str(SHOTS / "00-home-before-run.png"), full_page=True)

    appdriver.press_run(page)
    appdriver.wait_for_result(page, RUN_TIMEOUT_MS)
    assert appdriver.shown_ms(page, "TTFT") > 0
    _no_exception(page, "home after Run")
    page.screenshot(path=str(SHOTS / "01-home-after-run.png"), full_page=True)

    links = page.locator("[data-testid='stSidebarNav'] a")
    hrefs = list(dict.fromkeys(filter(None, (links.nth(i).get_attribute("href") for i in range(links.count())))))
    assert len(hrefs) >= 4, hrefs
    for i, href in enumerate(hrefs, start=2):
        # click the link (client-side navigation keeps the session, and with it the last run)
        page.locator(f"[data-testid='stSidebarNav'] a[href='{href}']").first.click()
        appdriver.settle(page)
        page.wait_for_function(  # every chart drawn before the screenshot
            "() => [...document.querySelectorAll(\"[data-testid='stPlotlyChart']\")]"
            ".every(c => c.querySelector('.main-svg'))", timeout=60_000)
        name = re.sub(r"\W+", "_", href.rstrip("/").rsplit("/", 1)[-1] or "home")[:40]
        _no_exception(page, name)
        page.screenshot(path=str(SHOTS / f"{i:02d}-{name}.png"), full_page=True)
    assert len(list(SHOTS.glob("*.png"))) >= len(hrefs) + 2
    page.context.close()


def test_a_closed_tab_frees_the_engine_for_the_next_student(dashboard):
    """Queue mode: A starts a long run, B waits behind it; A closes the tab mid-run. B must start within
    seconds (the session's run is cancelled), not after A's 512 tokens."""
    url, browser = dashboard
    a, b = (browser.new_context(viewport={"width": 1280, "height": 800}).new_page() for _ in range(2))
    for page in (a, b):
        page.goto(url, timeout=120_000)
        appdriver.settle(page)
    a.evaluate("() => 0")
    thumb = a.locator("[data-testid='stSidebar'] [data-testid='stSlider']").filter(
        has_text="Output length").get_by_role("slider")
    thumb.focus()
    thumb.press("End")  # 512 new tokens: tens of seconds on a CPU
    appdriver.settle(a)
    appdriver.press_run(a)
    a.get_by_text("Decode: token").first.wait_for(timeout=RUN_TIMEOUT_MS)  # A is on the bridge
    appdriver.press_run(b)
    b.get_by_text("Waiting in the queue").first.wait_for(timeout=60_000)
    closed = time.perf_counter()
    a.context.close()  # the student closes the tab
    appdriver.wait_for_result(b, RUN_TIMEOUT_MS)
    waited = time.perf_counter() - closed
    label = b.get_by_text(re.compile(r"Run finished")).first.inner_text()
    assert float(re.search(r"queue ([\d.]+) s", label).group(1)) > 0
    assert waited < 60, f"B finished {waited:.0f} s after A left: A's run was not cancelled"
    b.context.close()
