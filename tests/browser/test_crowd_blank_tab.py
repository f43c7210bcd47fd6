"""A tab whose page went blank reloads itself (ui/controls/tab_watch.py): Streamlit's frontend crash ("Bad delta path
index") leaves no app root in the page; the test removes the root by hand, as the crash does, and the page must come
back by itself, a fresh page (the marker set before is gone), with no exception. The tiny model; the dashboard and
Chromium are shared with the other files of its unit (tests/browser/shared.py)."""
from tests.browser import appdriver, shared


def test_a_blank_tab_reloads_itself():
    from playwright.sync_api import expect

    url = shared.dashboard(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    context = shared.browser().new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(url, timeout=180_000)
        appdriver.settle(page, 180_000)
        page.wait_for_function("() => window.__twoBendsTabWatch === true", timeout=60_000)  # its script loaded
        page.evaluate("() => { window.__beforeCrash = true; "
                      "document.querySelector(\"[data-testid='stApp']\").remove(); }")
        assert page.locator("[data-testid='stApp']").count() == 0  # blank, as after the crash
        page.wait_for_function("() => !window.__beforeCrash && !!document.querySelector(\"[data-testid='stApp']\")",
                               timeout=60_000)  # reloaded: a fresh page with its app drawn again
        appdriver.settle(page, 120_000)
        # the sidebar can be drawn a moment after the main block settled: wait for its button, do not count at once
        run = page.locator("[data-testid='stSidebar']").get_by_role("button", name="Run", exact=True)
        expect(run).to_have_count(1, timeout=60_000)
        assert appdriver.exception_text(page) is None
    finally:
        context.close()
