"""A restart loses nothing, in real Chromium: a teacher and two students in one room (the package's command,
`two-bends dashboard --room`), one poll round answered, the dashboard killed with kill -9 and started again with the
same command. The same join code comes back, the answers are there, the students are back in without the code (their
browsers' sign-in cookies), and the teacher's deep link (/console) lands where it points after the code."""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests import ROOT
from tests.browser import appdriver

TEACHER = "VALLEY9X"
TWICE, FOUR = "×2 — it grows with the prompt (×1.4 to ×2.8)", "×4 — four times: attention is quadratic (×2.8 or more)"
JOIN_LINE = re.compile(r"type the join code ([A-Z0-9-]+)")
WAIT_MS = 180_000


def start(cmd: list[str], env: dict, log: Path, port: int) -> subprocess.Popen:
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        appdriver.wait_for_port(port, 180)
    except RuntimeError:
        proc.kill()
        raise RuntimeError(f"the dashboard did not start: {log.read_text()[-2000:]}") from None
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def poll_page(page) -> None:
    page.get_by_role("heading", name="Predict, then measure").first.wait_for(timeout=WAIT_MS)


def test_a_kill_and_restart_keeps_the_code_the_answers_and_the_students(tmp_path):
    sync_api = appdriver.need_browser()
    port = appdriver.free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "two_bends_cli", "dashboard", "--room", "--data-dir", str(tmp_path / "room"),
           "--teacher-code", TEACHER, "--server.headless", "true", "--server.port", str(port)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", TWO_BENDS_MODEL="tiny-llama", TWO_BENDS_WORKER="thread")
    first = second = None
    try:
        first = start(cmd, env, tmp_path / "first.log", port)
        join = JOIN_LINE.search((tmp_path / "first.log").read_text()).group(1)
        with sync_api.sync_playwright() as pw:
            browser = appdriver.launch(pw)
            try:
                teacher = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                teacher.goto(f"{url}/console", timeout=WAIT_MS, wait_until="commit")
                teacher.get_by_label("Room code (on the projector)").fill(TEACHER.lower())
                teacher.get_by_role("button", name="Join").click()
                teacher.get_by_role("heading", name="Teacher console").wait_for(timeout=WAIT_MS)  # the deep link
                teacher.get_by_text(join).first.wait_for(timeout=60_000)  # the join code, on the console itself
                students = [appdriver.join_room(browser, url, join.lower(), timeout_ms=WAIT_MS) for _ in range(2)]

                teacher.goto(f"{url}/poll", wait_until="commit")  # signed in: no code asked again
                poll_page(teacher)
                teacher.locator(".st-key-poll_open button").first.click()
                teacher.get_by_text("stay hidden, here too").first.wait_for(timeout=60_000)
                for page, answer in zip(students, (TWICE, FOUR)):
                    page.goto(f"{url}/poll", wait_until="commit")
                    poll_page(page)
                    page.get_by_text(answer).first.click()
                    page.get_by_text("You may change it until the answers lock").first.wait_for(timeout=60_000)
                teacher.get_by_text("2 answers from 2 students").first.wait_for(timeout=60_000)

                os.kill(first.pid, signal.SIGKILL)  # mid-poll: the round open, two answers given
                first.wait(timeout=30)
                second = start(cmd, env, tmp_path / "second.log", port)  # the same command
                said = (tmp_path / "second.log").read_text()
                assert f"type the join code {join} (the same as before the restart)" in said

                for page, answer in zip(students, (TWICE, FOUR)):
                    page.reload(wait_until="commit")
                    poll_page(page)  # back in: no join form
                    assert page.get_by_label("Room code (on the projector)").count() == 0
                    mine = page.locator("[data-testid='stAlert']").filter(has_text="Your answer")
                    mine.first.wait_for(timeout=60_000)
                    assert answer in mine.first.inner_text()  # the answer given before the kill
                teacher.reload(wait_until="commit")
                poll_page(teacher)
                teacher.get_by_text("2 answers from 2 students").first.wait_for(timeout=60_000)
                teacher.get_by_role("button", name="Reveal").click()
                teacher.get_by_text("The room's answers, 2 in all").first.wait_for(timeout=60_000)
                teacher.goto(f"{url}/console", wait_until="commit")
                teacher.get_by_text("The room's server restarted at").first.wait_for(timeout=WAIT_MS)
                for page in [teacher, *students]:
                    assert appdriver.exception_text(page) is None
            except Exception:
                shots = ROOT / "artifacts"  # what each tab showed when it failed
                shots.mkdir(exist_ok=True)
                for i, page in enumerate(p for ctx in browser.contexts for p in ctx.pages):
                    page.screenshot(path=str(shots / f"room-restart-{i}.png"), full_page=True)
                raise
            finally:
                browser.close()
    finally:
        stop(first)
        stop(second)
