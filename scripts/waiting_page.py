"""A page whose run waits in the queue: how much work its browser does, beside an idle page (measurement only).

Starts the dashboard (queue mode, the default model) and three headless Chromium pages: one runs a long request
(1024 -> 400 tokens), one presses Run behind it and waits, one stays idle. Over 6 s of the wait, Chrome DevTools'
Performance.getMetrics deltas per page: main-thread task, script, layout and style time. Run under flock:
    .venv/bin/python scripts/waiting_page.py
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import appdriver  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

KEYS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "LayoutCount", "RecalcStyleCount")

def metrics(cdp) -> dict:
    """This page's DevTools performance counters (seconds and counts since the page opened)."""
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def main() -> None:
    with appdriver.dashboard({"TWO_BENDS_MODE": "queue"}) as (url, _), sync_playwright() as pw:
        browser = appdriver.launch(pw)
        pages = {}
        for name in ("long", "waiting", "idle"):
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            q = "?prompt_tokens=1024&output_tokens=400" if name == "long" else "?prompt_tokens=64&output_tokens=32"
            page.goto(url + "/" + q, timeout=300_000)
            appdriver.settle(page, 300_000)
            pages[name] = page
        cdps = {n: p.context.new_cdp_session(p) for n, p in pages.items()}
        for c in cdps.values():
            c.send("Performance.enable")
        pages["long"].get_by_role("button", name="Run").first.click()
        pages["long"].get_by_text("Decode: token").first.wait_for(timeout=120_000)
        pages["waiting"].get_by_role("button", name="Run").first.click()
        pages["waiting"].get_by_text("Waiting in the queue").first.wait_for(timeout=60_000)
        before = {n: metrics(c) for n, c in cdps.items()}
        time.sleep(6)
        after = {n: metrics(c) for n, c in cdps.items()}
        for n in cdps:
            print(n, {k: round(after[n][k] - before[n][k], 3) for k in KEYS})
        print("waiting page still waiting:", pages["waiting"].get_by_text("Waiting in the queue").count())
        browser.close()


if __name__ == "__main__":
    main()
