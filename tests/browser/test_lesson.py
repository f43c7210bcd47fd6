"""The shipped 45-minute lesson end to end in real Chromium, with the real SmolLM2: opened by its link in presenter
mode, every step reached with the PageDown key, its page shown, the step in the address bar, and every step that runs
(its own request, or Home's preset) saying it produced the lengths it asked for; PageUp goes back, a reload lands on
the same step, and the teacher sheet prints on one A4 page. The dashboard and Chromium are shared with
tests/browser/test_run_every_page.py (tests/browser/shared.py). Screenshots go to artifacts/screenshots/lesson-*.png
when that folder exists.
"""
import os
import re

from tests import ROOT
from tests.browser import appdriver, shared
from ui.demo import lesson, lesson_sheet, links

MODEL = os.environ.get("TWO_BENDS_BROWSER_MODEL", "smollm2-135m")  # the presets' verdicts need the real model
SHOTS = ROOT / "artifacts" / "screenshots"
LESSON = lesson.load(ROOT / "assets" / "lessons" / "45-minutes.json", pages=lesson.app_pages())
STEP_MS = 120_000  # a page drawn on a busy 2-core machine
RUN_MS = 300_000  # a preset's probe (four short runs, one of 1,024 tokens) and its run


def _wait_step(page, number: int, path: str) -> None:
    """The bar names step `number`, the address bar holds it, and the browser shows the step's page."""
    total = len(LESSON.steps)
    page.wait_for_function(
        "([n, total]) => { const bar = document.querySelector('.st-key-lesson_bar');"
        " return bar && bar.innerText.includes(`step ${n} of ${total}`); }", arg=[number, total], timeout=STEP_MS)
    page.wait_for_function("(n) => new URLSearchParams(location.search).get('step') === String(n)", arg=number,
                           timeout=STEP_MS)
    expected = "/" if path == links.HOME else f"/{path}"
    page.wait_for_function("(p) => location.pathname.replace(/\\/+$/, '/') === p || location.pathname === p",
                           arg=expected, timeout=STEP_MS)


def _check_line(page) -> str:
    """The bar's line after the step's run, once it is there."""
    line = page.locator(".st-key-lesson_check").get_by_text(re.compile("^This step: "))
    line.first.wait_for(timeout=RUN_MS)
    return line.first.inner_text()


def _no_exception(page, where: str) -> None:
    text = appdriver.exception_text(page)
    assert text is None, f"Streamlit exception on {where}: {text}"


def test_the_45_minute_lesson_runs_end_to_end():
    url = shared.users_dashboard(MODEL)
    page = shared.browser().new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{url}/{LESSON.link(1)}", timeout=STEP_MS)
        for number, step in enumerate(LESSON.steps, start=1):
            _wait_step(page, number, step.page)
            if step.runs:
                line = _check_line(page)
                assert "as asked" in line, f"step {number} ({step.title}): {line}"
            if step.page == "poll":  # the poll page opens with the step's question chosen
                page.wait_for_function("(q) => { const box = document.querySelector('.st-key-poll_pick input');"
                                       " return box && box.value === q; }", arg=step.poll_question,
                                       timeout=STEP_MS)
            _no_exception(page, f"step {number} ({step.page})")
            assert page.locator("[data-testid='stSidebar']").is_hidden(), f"step {number}: presenter mode"
            if SHOTS.exists():
                page.screenshot(path=str(SHOTS / f"lesson-{number:02d}-{step.page}.png"))
            if number < len(LESSON.steps):
                page.evaluate("() => document.activeElement && document.activeElement.blur()")  # not a field
                page.keyboard.press("PageDown")
        page.wait_for_function("() => [...document.querySelectorAll('.st-key-lesson_next button')]"
                               ".every((b) => b.disabled)", timeout=STEP_MS)  # the last step: no Next
        assert page.locator("[data-testid='stSidebar']").is_hidden()  # presenter mode all the way

        page.keyboard.press("PageUp")
        before = len(LESSON.steps) - 1
        _wait_step(page, before, LESSON.steps[before - 1].page)
        page.reload()  # F5: a new session, the same step
        _wait_step(page, before, LESSON.steps[before - 1].page)
        _no_exception(page, "the reloaded step")
    finally:
        page.close()


def test_the_teacher_sheet_prints_on_one_page():
    page = shared.browser().new_page()
    try:
        page.set_content(lesson_sheet.html(LESSON))
        pdf = page.pdf(prefer_css_page_size=True, print_background=True)
    finally:
        page.close()
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert pages == 1, f"the teacher sheet prints on {pages} pages"
    if SHOTS.exists():
        (SHOTS / "lesson-teacher-sheet.pdf").write_bytes(pdf)
