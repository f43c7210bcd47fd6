"""Fair to every student, in real Chromium: while the teacher runs the largest lab (a prompt sweep up to
2048 tokens on SmolLM2), a student's default run shows its first token within 2x its quiet TTFT plus one lab slice.

Checked loosely (half a second of slack for a 2-core machine that also draws two browsers); benchmarks/fairness.py measures
the same bound without a browser and prints every run. All three numbers come from the engine: the student's queue
wait and TTFT (Home), the longest slice the sweep held the engine between two points (the teacher console).
In the suite it runs last in the browser part: its dashboard, joins and warm run beside the other workers' last
units, everything it measures after they have ended and the cores are quiet (`machine_to_itself`, tests/conftest.py).
"""
import re
import tempfile

import pytest

from engine.loading.model_store import DEFAULT_MODEL
from tests import ROOT
from tests.browser import appdriver

JOIN, TEACHER = "FAIR42", "TEACH42"
SLACK_S = 0.5
MEETINGS = 4  # student runs tried until one waits behind a lab slice


def _open(page, name: str) -> None:
    appdriver.open_page(page, name)
    appdriver.settle(page, 300_000)


def _queue_s(page) -> float:
    """The queue wait Home states (only when it is 0.05 s or more), else 0."""
    caption = page.get_by_text(re.compile(r"this request waited [\d.,]+ s for the shared engine"))
    if not caption.count():
        return 0.0
    return float(re.search(r"waited ([\d.,]+) s", caption.first.inner_text()).group(1).replace(",", ""))


def _student_run(page) -> tuple[float, float]:
    appdriver.press_run(page)
    bar = page.locator("[data-testid='stProgress']").first  # the run's bar: the old result is no answer
    bar.wait_for(timeout=300_000)
    bar.wait_for(state="hidden", timeout=300_000)
    appdriver.wait_for_result(page, 300_000)
    return _queue_s(page), appdriver.shown_ms(page, "TTFT (prefill)") / 1000


@pytest.mark.timed  # its bound is against a quiet TTFT taken in the same test: nothing else may run beside it
def test_a_students_run_waits_at_most_one_slice_behind_the_largest_lab(machine_to_itself):
    appdriver.need_browser()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    (ROOT / "artifacts").mkdir(exist_ok=True)
    env = dict(TWO_BENDS_ROOM="1", TWO_BENDS_JOIN_CODE=JOIN, TWO_BENDS_TEACHER_CODE=TEACHER,
               TWO_BENDS_MODEL=DEFAULT_MODEL,  # SmolLM2, queue mode
               TWO_BENDS_DATA_DIR=tempfile.mkdtemp(prefix="two-bends-room-"))  # the room's file: not the user's folder
    with appdriver.dashboard(env, ROOT / "artifacts" / "streamlit-room-fairness.log") as (url, _), \
            sync_playwright() as pw:
        browser = appdriver.launch(pw)
        try:
            teacher, student = (appdriver.join_room(browser, url, code, viewport=(1400, 1000), timeout_ms=180_000,
                                                    settle_ms=300_000) for code in (TEACHER, JOIN))
            _student_run(student)  # warm: the first run also loads the model
            print(machine_to_itself(), flush=True)  # from here on, nothing else runs beside this test
            _, quiet_ttft = _student_run(student)

            _open(teacher, "Sweep lab")
            lengths = teacher.locator("[data-testid='stMultiSelect']").filter(has_text="Prompt lengths")
            for n in ("1024", "2048"):  # the largest sweep the lab offers
                lengths.locator("input").click()
                teacher.get_by_role("option", name=n, exact=True).click()
            teacher.keyboard.press("Escape")
            teacher.get_by_role("button", name="▶ Run sweep").click()
            teacher.locator("[data-testid='stProgress']").first.wait_for(timeout=120_000)  # the sweep runs

            try:  # the 1024-token point just ended (ui/text/sweep_numbers.sweep_progress): the longest, 2048, runs now
                teacher.get_by_text(re.compile(r"round \d+ of \d+: 1024 in, ")).first.wait_for(timeout=120_000)
            except PlaywrightTimeout:
                pass  # a missed glimpse of the bar: the retries below still meet a slice
            student.bring_to_front()
            runs = []  # (queue s, TTFT s): a run that arrives between two short points waits < 0.05 s and meets no
            for _ in range(MEETINGS):  # slice, so it is run again (the sweep's points grow: later ones are longer)
                runs.append(_student_run(student))
                if runs[-1][0] > 0:
                    break
            teacher.bring_to_front()
            # the slice the run waited behind has ended, so "so far" covers it; the rest of the sweep is not needed
            _open(teacher, "Teacher console")
            caption = teacher.get_by_text(re.compile(r"Longest lab slice so far: [\d.,]+ s"))
            caption.first.wait_for(timeout=60_000)
            slice_s = float(re.search(r"so far: ([\d.,]+) s", caption.first.inner_text()).group(1).replace(",", ""))
            cancel = teacher.get_by_role("button", name="Cancel everything in flight")
            nothing = teacher.get_by_text("Nothing in flight")
            cancel.or_(nothing).first.wait_for(timeout=60_000)  # the sweep may have ended by now: nothing to cancel
            if cancel.count():
                cancel.click()
            nothing.first.wait_for(timeout=120_000)
            print(f"quiet TTFT {quiet_ttft * 1000:.0f} ms; behind the sweep: "
                  + "; ".join(f"queue {q * 1000:.0f} ms + TTFT {t * 1000:.0f} ms" for q, t in runs)
                  + f"; longest slice {slice_s * 1000:.0f} ms")
            assert slice_s > 0.05, "the sweep never held the engine: nothing was measured"
            assert runs[-1][0] > 0, f"none of {len(runs)} student runs met the sweep: the bound was not put to the test"
            for queue_s, ttft_s in runs:  # the bound holds for every run, not only the one that met a slice
                assert queue_s + ttft_s <= 2 * quiet_ttft + slice_s + SLACK_S, (queue_s, ttft_s, quiet_ttft, slice_s)
            for page in (teacher, student):
                assert appdriver.exception_text(page) is None
        finally:
            browser.close()
