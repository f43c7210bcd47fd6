"""The dark theme in a real browser at 1280x720: `theme=dark` in the link darkens Streamlit's page and the charts,
the sidebar switch and the presenter bar's button flip it, and the link follows. Screenshots go to
artifacts/screenshots/ (dark-*.png) when that folder exists.

The app runs the tiny random Llama (TWO_BENDS_MODEL=tiny-llama); a shipped recording gives Home its chart. The
dashboard and Chromium are shared with the other files of its unit (tests/browser/shared.py).
"""

import pytest

from tests import ROOT
from tests.browser import appdriver, shared

SHOTS = ROOT / "artifacts" / "screenshots"
TRACE = "long-prompt-short-answer"
DARK_BG, LIGHT_BG = "rgb(14, 17, 23)", "rgb(255, 255, 255)"
APP_BG = "() => getComputedStyle(document.querySelector(\"[data-testid='stApp']\")).backgroundColor"
CHART_BG = "() => getComputedStyle(document.querySelector('.js-plotly-plot .main-svg')).backgroundColor"
TEXT = "() => getComputedStyle(document.querySelector(\"[data-testid='stMain'] h1\")).color"


@pytest.fixture
def app():
    return shared.dashboard(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")


def wait_for_look(page, background: str) -> None:
    page.wait_for_function(f"() => ({APP_BG})() === '{background}' && !!document.querySelector('.js-plotly-plot "
                           f".main-svg') && ({CHART_BG})() === '{background}'", timeout=60_000)


def shot(page, name: str) -> None:
    if SHOTS.is_dir():
        page.screenshot(path=str(SHOTS / f"dark-{name}.png"))


def test_the_link_the_sidebar_and_the_presenter_bar_switch_page_and_charts(app):
    page = shared.browser().new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{app}/?trace={TRACE}&theme=dark", timeout=120_000)
        appdriver.settle(page)
        wait_for_look(page, DARK_BG)  # the page and its chart, both dark
        assert page.evaluate(TEXT) != "rgb(49, 51, 63)"  # headings are light, not Streamlit's dark ink
        switch = page.locator("[data-testid='stSidebar'] .st-key-theme_dark input")
        assert switch.is_checked()
        shot(page, "home")
        assert appdriver.exception_text(page) is None

        page.locator("[data-testid='stSidebar'] .st-key-theme_dark label").click()  # the sidebar switch: light
        wait_for_look(page, LIGHT_BG)
        page.wait_for_function("() => !location.search.includes('theme=')", timeout=30_000)
        page.locator("[data-testid='stSidebar'] .st-key-theme_dark label").click()  # and dark again
        wait_for_look(page, DARK_BG)
        page.wait_for_function("() => location.search.includes('theme=dark')", timeout=30_000)  # shareable

        page.goto(f"{app}/timing?trace={TRACE}&theme=dark&present=1", timeout=120_000)
        appdriver.settle(page)
        wait_for_look(page, DARK_BG)
        shot(page, "presenter-timing")
        page.locator(".st-key-theme_switch button").first.click()  # the presenter bar's button
        wait_for_look(page, LIGHT_BG)
        assert "Dark" in page.locator(".st-key-theme_switch button").first.inner_text()
        assert appdriver.exception_text(page) is None
    finally:
        page.close()
