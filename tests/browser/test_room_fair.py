"""Room fairness in real Chromium: a student's lab page says the labs are the teacher's (the engine never sees the
job), the teacher's does not.

The app runs the tiny random Llama in room mode (TWO_BENDS_ROOM=1), as scripts/appdriver.py starts it.
"""
import sys
from pathlib import Path

import pytest

from tests import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import appdriver  # noqa: E402  (scripts/appdriver.py: shared with the measurement scripts)

pytestmark = pytest.mark.slow
JOIN, TEACHER = "JOIN42", "TEACH42"
REFUSAL = "the lab measurements are the teacher's"  # ui/engine_link/room_slots.py's LAB_REFUSALS["teacher"]


def _need_browser() -> None:
    if not Path(appdriver.CHROMIUM).exists():
        pytest.skip(f"{appdriver.CHROMIUM} is missing (the test command installs Debian's chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


def _join(browser, url: str, code: str, path: str = ""):
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url, timeout=120_000)
    page.get_by_label("Room code (on the projector)").fill(code)
    page.get_by_role("button", name="Join").click()
    page.locator("[data-testid='stSidebarNav']").wait_for(timeout=120_000)
    appdriver.settle(page)
    if path:
        page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=path).click()
        appdriver.settle(page)
    return page


def test_a_students_lab_is_refused_with_a_clear_line_and_the_teachers_is_not():
    _need_browser()
    from playwright.sync_api import sync_playwright

    (ROOT / "artifacts").mkdir(exist_ok=True)
    env = dict(TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_ROOM="1", TWO_BENDS_JOIN_CODE=JOIN, TWO_BENDS_TEACHER_CODE=TEACHER)
    with appdriver.dashboard(env, ROOT / "artifacts" / "streamlit-room-fair.log") as (url, _), sync_playwright() as pw:
        browser = appdriver.launch(pw)
        try:
            student = _join(browser, url, JOIN, "Sweep lab")
            student.get_by_text(REFUSAL).wait_for(timeout=60_000)
            student.get_by_role("button", name="▶ Run sweep").click()
            appdriver.settle(student)
            assert student.get_by_text("Measuring on").count() == 0  # no progress bar: the engine never saw a job
            assert appdriver.exception_text(student) is None

            teacher = _join(browser, url, TEACHER, "Sweep lab")
            teacher.get_by_role("button", name="▶ Run sweep").wait_for(timeout=60_000)
            assert teacher.get_by_text(REFUSAL).count() == 0
            assert appdriver.exception_text(teacher) is None
        finally:
            browser.close()

