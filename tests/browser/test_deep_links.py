"""A shared link opened on a fresh server: Streamlit must run app.py (the router and its frame), never a page file alone.

Pages sit in pages/<role>/ subfolders: Streamlit's old multipage discovery reads only files directly inside pages/, so
it never runs a page file alone; the launcher (ui/controls/launch.py, what scripts/dashboard.sh runs) switches that old
mode off before the first request, so the first visitor arriving by a path-style link gets no "Page not found" notice.
Each link gets its own fresh server (the notice showed only on a server's very first request).
"""

import pytest

from tests.browser import appdriver

TRACE = "long-prompt-short-answer"


@pytest.mark.parametrize("path, heading", [("timing", "ledger"), ("prefill", "Prefill")])
def test_first_deep_link_on_a_fresh_server_runs_inside_the_app(path, heading):
    sync_api = appdriver.need_browser()
    with appdriver.dashboard({"TWO_BENDS_REPLAY": "1"}) as (url, _):
        with sync_api.sync_playwright() as pw:
            browser = appdriver.launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{url}/{path}?trace={TRACE}", timeout=120_000)
                page.locator("h1").filter(has_text=heading).first.wait_for(timeout=120_000)
                # app.py's frame: its navigation lists every page, and its sidebar holds the shared controls
                nav = page.locator("[data-testid='stSidebarNav']")
                nav.wait_for(timeout=60_000)
                assert nav.get_by_text("Home — two bends").count() == 1
                assert nav.get_by_text("Measure a server").count() == 1
                body = page.locator("body").inner_text().lower()
                assert "page not found" not in body and "you have requested page" not in body
                assert page.locator("[data-testid='stException']").count() == 0
            finally:
                browser.close()
