"""Room mode in real Chromium: no page without the code (deep links too), wrong codes refused and then slowed,
the teacher code opens the console, and the launcher prints the room's URL, codes and QR code."""
import re
import time

import pytest

from tests.browser import appdriver

JOIN, TEACHER = "BRIDGE7", "VALLEY9X"
DEEP_LINKS = ["", "timing", "prefill", "lab_sweeps", "lab_profile", "measure", "poll", "console", "?page=decode&run=1"]


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    sync_api = appdriver.need_browser()
    folder = tmp_path_factory.mktemp("room")
    log = folder / "server.log"
    env = dict(TWO_BENDS_ROOM="1", TWO_BENDS_JOIN_CODE=JOIN.lower(), TWO_BENDS_TEACHER_CODE=TEACHER,
               TWO_BENDS_DATA_DIR=str(folder),  # the room's file: this test's own, not the user's data folder
               TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    with appdriver.dashboard(env, log_path=log) as (url, _), sync_api.sync_playwright() as pw:
        browser = appdriver.launch(pw)
        try:
            yield url, browser, log
        finally:
            browser.close()


def join_form(browser, url, path="", page=None):
    page = page or browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{url}/{path}", timeout=120_000)
    page.locator("h1").filter(has_text="join the room").wait_for(timeout=120_000)
    return page


def enter(page, code):
    page.get_by_label("Room code (on the projector)").fill(code)
    page.get_by_role("button", name="Join").click()
    appdriver.settle(page)  # each try is its own script run: none cut short by the next


def error_text(page, pattern):
    alert = page.locator("[data-testid='stAlert']").filter(has_text=re.compile(pattern))
    alert.first.wait_for(timeout=60_000)
    return alert.first.inner_text()


def test_the_launcher_prints_the_url_codes_and_a_qr_code(room):
    url, _, log = room
    text = log.read_text()
    assert f"students open {url}" in text and "BRI-DGE-7" in text and "VAL-LEY-9X" in text
    assert text.count("▄") > 20  # the QR code, drawn in half blocks


@pytest.fixture(scope="module")
def tab(room):
    """One tab for every deep link, each typed into its address bar in turn: no code is entered there, so nothing
    signs it in, and the app's scripts stay cached (a fresh browser context costs ~1.6 s more CPU per page here)."""
    page = room[1].new_page(viewport={"width": 1280, "height": 720})
    yield page
    page.close()


@pytest.mark.parametrize("path", DEEP_LINKS)
def test_no_page_without_the_code(room, tab, path):
    url, browser, _ = room
    page = join_form(browser, url, path, tab)
    appdriver.settle(page)  # the script run is over: anything that would leak is drawn
    titles = [t.strip() for t in page.locator("h1").all_inner_texts()]
    assert titles == ["Two Bends — join the room"]
    assert page.locator("[data-testid='stSidebarNav']").count() == 0
    assert page.get_by_role("button", name=re.compile("^Run")).count() == 0
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_wrong_code_is_refused_and_the_next_try_slowed(room):
    url, browser, _ = room
    page = join_form(browser, url, "timing")
    try:
        for attempt in range(1, 5):
            enter(page, f"WRONG{attempt}")
            error_text(page, "not this room's" if attempt < 4 else "next try is possible in")
        enter(page, JOIN)  # the right code, too soon: not even looked at
        assert "wait" in error_text(page, "Too many wrong codes")
        time.sleep(2.5)  # the first back-off is 2 s
        enter(page, "bri-dge-7")
        page.locator("[data-testid='stSidebarNav']").wait_for(timeout=120_000)
        nav = page.locator("[data-testid='stSidebarNav']")
        assert nav.get_by_text("Timing — the ledger").count() == 1  # the deep link's page, now open
        assert nav.get_by_text("Teacher console").count() == 0  # a student
    finally:
        page.close()


def test_the_teacher_code_opens_the_console_and_shows_the_join_code_in_presenter_mode(room):
    url, browser, _ = room
    page = join_form(browser, url, "?present=1")
    try:
        enter(page, TEACHER.lower())
        banner = page.locator(".st-key-room_code_banner")
        banner.wait_for(timeout=120_000)
        banner.locator("img").first.wait_for(timeout=30_000)  # the QR code
        assert "BRI-DGE-7" in banner.inner_text()
        page.get_by_role("button", name=re.compile("Hide the join code")).click()
        banner.wait_for(state="detached", timeout=30_000)
        page.get_by_role("button", name=re.compile("Show the join code")).wait_for(timeout=30_000)
        page.locator(".st-key-presenter_bar").get_by_role("button", name=re.compile("The room")).click()
        page.locator("[data-testid='stPageLink'] a").filter(has_text="Teacher console").first.click()
        page.locator("h1").filter(has_text="Teacher console").wait_for(timeout=60_000)
        assert page.get_by_text("enter the teacher code").count() == 0
    finally:
        page.close()
