"""What the benchmarks that drive many browsers at once (loadtest, room_size) read off the page (Playwright, async)."""
from __future__ import annotations

import asyncio
import re

# the run panel's line (ui/text/run_numbers.finished_label), with or without its CPU-wait words
FINISHED = re.compile(r"Run finished: (\d+) → (\d+) tokens, TTFT ([\d,.]+) ms, total ([\d,.]+) s"
                      r"(?:, waited for a CPU [^(]*)? \(queue ([\d,.]+) s")


async def settle(page, timeout_ms: int) -> None:
    """Until the page is drawn and Streamlit's running indicator is gone."""
    await asyncio.sleep(0.7)
    await page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=timeout_ms)
    await page.wait_for_function("() => !document.querySelector(\"[data-testid='stStatusWidget']\")",
                                 timeout=timeout_ms)


async def finished(page) -> dict:
    """The numbers of the run the page finished last: its 'Run finished' line and the TPOT tile (None for 1 token)."""
    m = FINISHED.search(await page.get_by_text(FINISHED).first.inner_text())
    number = [float(g.replace(",", "")) for g in m.groups()]
    tpot = None
    if number[1] > 1:
        text = await page.locator("[data-testid='stMetric']").filter(has_text="TPOT").first.inner_text()
        if found := re.search(r"([\d,]+(?:\.\d+)?)\s*ms", text):
            tpot = float(found.group(1).replace(",", ""))
    return dict(prompt=int(number[0]), output=int(number[1]), ttft_ms=number[2], total_s=number[3],
                queue_s=number[4], tpot_ms=tpot)
