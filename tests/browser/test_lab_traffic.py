"""The Traffic lab in a real browser (headless Chromium, tiny model): a short burst replayed per policy, disaggregated
included (its two workers started from inside the dashboard's engine worker process), no exception. The dashboard and
Chromium are shared with the other files of its unit (tests/browser/shared.py)."""
from tests.browser import appdriver, shared


def test_a_short_burst_is_compared_across_policies():
    url = shared.dashboard(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    page = shared.browser().new_page(viewport={"width": 1400, "height": 1000})
    try:
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
        policies = page.locator("[data-testid='stMultiSelect']").filter(has_text="Policies to compare")
        policies.locator("input").click()
        page.get_by_role("option", name="disaggregated", exact=True).click()
        page.keyboard.press("Escape")
        appdriver.settle(page)
        page.get_by_role("button", name="▶ Run traffic").click()
        page.get_by_text("Best goodput").first.wait_for(timeout=180_000)
        appdriver.settle(page)
        body = page.locator("body").inner_text()
        assert "4 requests of the 'chat' kind, all at once" in body
        assert "KV carts crossed between the workers" in body and "The KV cart crossing" in body
        charts = page.locator("[data-testid='stPlotlyChart']")  # TTFT, ITL, goodput, timeline
        charts.nth(3).wait_for(timeout=60_000)  # the chart component loads on its first use: after the text
        assert charts.count() == 4
        page.get_by_text("disaggregated", exact=True).last.click()  # the timeline of the two workers
        appdriver.settle(page)
        page.get_by_text("The two workers side by side", exact=False).first.wait_for(timeout=60_000)
        assert appdriver.exception_text(page) is None
    finally:
        page.close()
