"""Runs survive a refresh, in a real browser: run once, press F5, the Timing page still shows that run; another
browser (a second Playwright context: its own cookies) sees none of it.

The app runs the tiny random Llama (TWO_BENDS_MODEL=tiny-llama); the dashboard and Chromium are shared with the other
files of its unit (tests/browser/shared.py).
"""
import time

from tests.browser import appdriver, shared

RUN_TIMEOUT_MS = 300_000
COOKIE = "two_bends_browser"  # ui/engine_link/worker_link.py's cookie


def _no_exception(page, where: str) -> None:
    text = appdriver.exception_text(page)
    assert text is None, f"Streamlit exception on {where}: {text}"


def _cookie(context, timeout_s: float = 30.0) -> str | None:
    """The history cookie, once the page's script has set it."""
    end = time.time() + timeout_s
    while time.time() < end:
        value = {c["name"]: c["value"] for c in context.cookies()}.get(COOKIE)
        if value:
            return value
        time.sleep(0.2)
    return None


def _timing(page) -> None:
    """Open the Timing page from the sidebar's navigation (same session)."""
    page.locator("[data-testid='stSidebarNav']").get_by_role("link", name="Timing").click()
    appdriver.settle(page)


def test_a_refresh_keeps_the_runs_and_another_browser_does_not_see_them():
    url = shared.dashboard(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    browser = shared.browser()
    mine = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = mine.new_page()
        page.goto(url, timeout=120_000)
        appdriver.settle(page)
        appdriver.press_run(page)
        appdriver.wait_for_result(page, RUN_TIMEOUT_MS)
        _timing(page)
        page.get_by_text("Every run of this session (1)").wait_for(timeout=60_000)
        asked = page.get_by_text("Last run:").first.inner_text()

        token = _cookie(mine)
        assert token, "the browser was given no history cookie"
        assert len(token) >= 40 and token not in page.url  # random, and never in the link
        assert token not in page.inner_text("body")  # never shown

        page.reload()  # F5: a new Streamlit session
        appdriver.settle(page)
        page.get_by_text("Every run of this session (1)").wait_for(timeout=60_000)
        assert page.get_by_text("Last run:").first.inner_text() == asked
        _no_exception(page, "Timing after F5")

        second_tab = mine.new_page()  # same browser, another tab: the same runs
        second_tab.goto(f"{url}/timing", timeout=120_000)
        appdriver.settle(second_tab)
        second_tab.get_by_text("Every run of this session (1)").wait_for(timeout=60_000)
        second_tab.close()

        other = browser.new_context(viewport={"width": 1400, "height": 1000})  # another browser
        stranger = other.new_page()
        stranger.goto(f"{url}/timing", timeout=120_000)
        appdriver.settle(stranger)
        stranger.get_by_text("Press Run in the sidebar").first.wait_for(timeout=60_000)
        assert stranger.get_by_text("Last run:").count() == 0
        other_token = _cookie(other)
        assert other_token and other_token != token
        _no_exception(stranger, "Timing in another browser")
        other.close()
    finally:
        mine.close()
