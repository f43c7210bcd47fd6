"""Presenter mode in a real browser: `streamlit run app.py` in replay mode (no model), headless Chromium, keys.

→ and ← press the page's own Next / Previous buttons, space starts and stops autoplay, which switches
itself off at the last token; the sidebar is hidden and the numbers are large. Screenshots at 1280x720 go to
artifacts/screenshots/ (presenter-*.png) when that folder exists. The dashboards and Chromium are shared with the other
files of its unit (tests/browser/shared.py).
"""
import re
import time

import pytest

from tests import ROOT
from tests.browser import appdriver, shared
from ui.state import DECODE_NEXT, PREFILL_NEXT

SHOTS = ROOT / "artifacts" / "screenshots"
TRACE = "long-prompt-short-answer"  # 8 tokens: autoplay reaches the end quickly


@pytest.fixture
def replay_server():
    return shared.dashboard(TWO_BENDS_REPLAY="1")


def _token(page) -> int:
    """The step shown: 'Token N of M' (1 = the first token, made by prefill)."""
    text = page.get_by_text(re.compile(r"^Token \d+ of \d+")).first.inner_text()
    return int(re.match(r"Token (\d+)", text).group(1))


def _wait_token(page, expected: int, timeout_s: float = 60.0) -> None:
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            if _token(page) == expected:
                return
        except Exception:  # noqa: BLE001 - the text is being redrawn
            pass
        time.sleep(0.2)
    raise AssertionError(f"expected token {expected}, the page shows {_token(page)}")


def _keys_ready(page, button: str) -> None:
    """Wait until the page's run is over and its key listener reads this page's buttons (`button`: the Next one's key):
    a key pressed before that finds no button and does nothing, as it would for a presenter."""
    appdriver.settle(page)
    page.wait_for_function("(key) => window.__twoBendsKeys && document.querySelector(`div.two-bends-keys[data-next='${key}']`)",
                           arg=button, timeout=60_000)


def test_presenter_keys_drive_decode_and_prefill(replay_server):
    page = shared.browser().new_page(viewport={"width": 1280, "height": 720})
    try:
        # straight to a deep link (on a fresh server's first request: tests/browser/test_deep_links.py)
        page.goto(f"{replay_server}/decode?present=1&trace={TRACE}", timeout=120_000)
        page.get_by_text(re.compile(r"^Token 1 of 8")).first.wait_for(timeout=120_000)
        page.locator("[data-testid='stSidebar']").wait_for(state="hidden", timeout=30_000)  # presenter: no sidebar
        value = page.locator("[data-testid='stMetricValue']").first
        assert float(value.evaluate("e => getComputedStyle(e.querySelector('p')).fontSize").rstrip("px")) >= 40
        if SHOTS.exists():
            page.screenshot(path=str(SHOTS / "presenter-decode.png"))

        _keys_ready(page, DECODE_NEXT)
        page.keyboard.press("ArrowRight")
        _wait_token(page, 2)
        page.keyboard.press("ArrowRight")
        _wait_token(page, 3)
        page.keyboard.press("ArrowLeft")
        _wait_token(page, 2)
        page.keyboard.press(" ")  # autoplay on: one token per second, then it stops at the last one
        _wait_token(page, 8, timeout_s=90)
        page.wait_for_function("() => !document.querySelector('.st-key-dc_autoplay input').checked", timeout=30_000)
        time.sleep(2.5)
        assert _token(page) == 8  # switched itself off at the last token
        for expected in (7, 6, 5, 4):
            page.keyboard.press("ArrowLeft")
            _wait_token(page, expected)
        page.keyboard.press(" ")  # on again...
        page.wait_for_function("() => document.querySelector('.st-key-dc_autoplay input').checked", timeout=30_000)
        _wait_token(page, 5)
        page.keyboard.press(" ")  # ...and off: it stays where it is
        page.wait_for_function("() => !document.querySelector('.st-key-dc_autoplay input').checked", timeout=30_000)
        time.sleep(1.5)
        stopped = _token(page)
        time.sleep(3)
        assert _token(page) == stopped < 8
        assert page.locator("[data-testid='stException']").count() == 0

        page.locator("[data-testid='stPageLink'] a").filter(has_text="Prefill").first.click()
        page.get_by_text("Prefill: all 512 prompt rows").first.wait_for(timeout=120_000)
        _keys_ready(page, PREFILL_NEXT)
        page.keyboard.press("ArrowRight")
        page.get_by_text("Decode step 1 of 7").first.wait_for(timeout=60_000)
        page.keyboard.press("ArrowLeft")
        page.get_by_text("Prefill: all 512 prompt rows").first.wait_for(timeout=60_000)
        if SHOTS.exists():
            page.screenshot(path=str(SHOTS / "presenter-prefill.png"))
        assert page.locator("[data-testid='stException']").count() == 0

        page.get_by_role("button", name=re.compile("Exit")).click()
        page.locator("[data-testid='stSidebar']").wait_for(state="visible", timeout=60_000)
    finally:
        page.close()


def test_a_presenter_link_with_run_runs_when_opened_without_a_sidebar():
    """A prepared link is a prepared slide: a fresh browser context opens it, the run starts by itself and finishes, the
    sidebar stays hidden, and presenter mode's bar reaches the labs, the glossary and Run (tiny model, thread worker)."""
    url = shared.dashboard(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    page = shared.browser().new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{url}/?page=decode&prompt_tokens=16&output_tokens=8&present=1&run=1", timeout=120_000)
        page.get_by_text(re.compile(r"^Token 1 of 8")).first.wait_for(timeout=180_000)  # the run finished
        appdriver.settle(page)
        assert page.locator("[data-testid='stSidebar']").is_hidden()
        assert page.get_by_text("Press Run").count() == 0
        assert page.locator("[data-testid='stAppDeployButton']").count() == 0  # config.toml: toolbarMode viewer
        bar = page.locator(".st-key-presenter_bar")
        assert bar.get_by_role("button", name=re.compile("16 → 8")).count() == 1  # the link's lengths
        box = bar.bounding_box()
        assert box["y"] + box["height"] < 120  # one compact row at 1280 px
        if SHOTS.exists():
            page.screenshot(path=str(SHOTS / "presenter-run-link.png"))

        bar.get_by_role("button", name=re.compile("Glossary")).click()
        page.get_by_text(re.compile("time to first token")).first.wait_for(timeout=30_000)
        page.keyboard.press("Escape")
        bar.get_by_role("button", name=re.compile("Labs")).click()
        page.locator("[data-testid='stPageLink'] a").filter(has_text="Sweep lab").first.click()
        page.get_by_role("heading", name=re.compile("Sweep")).first.wait_for(timeout=120_000)
        appdriver.settle(page)
        assert page.locator("[data-testid='stSidebar']").is_hidden()
        page.locator(".st-key-presenter_bar").get_by_role("button", name="Run", exact=True).click()  # from a lab
        page.locator(".st-key-run_panel").get_by_text(re.compile(r"^Run finished: 16 → 8 tokens")).first.wait_for(
            timeout=180_000)  # the run panel stays visible in presenter mode
        appdriver.settle(page)
        assert appdriver.exception_text(page) is None
    finally:
        page.close()
