"""The Traffic lab in a real browser (headless Chromium, tiny model): a short burst replayed per policy, no exception."""
import os

import pytest

from tests.browser.test_presenter import CHROMIUM, appdriver

pytestmark = pytest.mark.slow


def test_a_short_burst_is_compared_across_policies():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (the test command installs Debian's chromium); browser test skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with appdriver.dashboard({"TWO_BENDS_MODEL": "tiny-llama"}) as (url, _), sync_api.sync_playwright() as pw:
        browser = appdriver.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab_traffic", timeout=120_000)
            page.locator("h1").filter(has_text="Traffic lab").first.wait_for(timeout=120_000)
            appdriver.settle(page)
            page.get_by_text("Burst: all at once").click()
            appdriver.settle(page)
            for label, value in (("Prompt tokens (mean)", "12"), ("Output tokens (mean)", "4"), ("Requests", "4")):
                box = page.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Enter")
                appdriver.settle(page)
            page.get_by_role("button", name="▶ Run traffic").click()
            page.get_by_text("Best goodput").first.wait_for(timeout=180_000)
            appdriver.settle(page)
            assert "4 requests of the 'chat' kind, all at once" in page.locator("body").inner_text()
            assert page.locator("[data-testid='stPlotlyChart']").count() == 4  # TTFT, ITL, goodput, timeline
            assert appdriver.exception_text(page) is None
        finally:
            browser.close()
