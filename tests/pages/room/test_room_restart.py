"""The room across a server restart, in AppTest through app.py (the same room file, a new server's cache read from it):
a student back in by its browser's sign-in cookie without the code and its answer there; the teacher console with the
same members, the round and the restart said; a removed student's cookie no longer admits; a deep link lands where it
points after the code; a student's locked lab shows its buttons off with the reason; a room file that cannot be used
is a banner for the teacher while the room works on."""
import itertools

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.engine_link import browser_runs
from ui.room import config, console, current, gate
from ui.room.keeper import Keeper
from ui.room.registry import Room
from ui.room.store import FILE_NAME

APP = str(ROOT / "app.py")
SID, COOKIE = "test_sid", "test_cookie"  # AppTest has one session id and no cookies: each test app names its own
_ids = itertools.count()


@pytest.fixture
def room_env(monkeypatch, navigation_only, tmp_path):
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")
    monkeypatch.setenv(config.ENV_DATA_DIR, str(tmp_path))
    monkeypatch.setattr(current, "session_id", lambda: st.session_state.get(SID, "no-session"))
    monkeypatch.setattr(gate, "_cookie", lambda: st.session_state.get(COOKIE))  # what the browser sends back
    current.held.clear()
    current.throttle.clear()
    yield tmp_path
    current.held.clear()


def browser(cookie: str | None = None, landing: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[SID] = f"session-{next(_ids)}"
    if cookie:
        at.session_state[COOKIE] = cookie
    if landing:
        at.session_state[state.ROOM_LANDING] = landing  # as the gate notes a deep link's path (/console, /timing)
    return at.run()


def enter(at: AppTest, code: str) -> AppTest:
    at.text_input(key=state.ROOM_CODE).set_value(code)
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def test_after_a_restart_the_room_is_back_and_a_student_is_in_without_the_code(room_env):
    teacher, student = enter(browser(), "valley9"), enter(browser(), "bridge")
    teacher.switch_page("pages/room/poll.py").run()
    teacher.selectbox(key=state.POLL_PICK).set_value("double-the-prompt")
    teacher.button(key=state.POLL_OPEN).click().run()
    student.switch_page("pages/room/poll.py").run()
    label = current.room().poll.question.options[2].label
    next(r for r in student.radio if r.key.startswith(state.POLL_CHOICE)).set_value(label).run()
    name = current.room().member(student.session_state[SID]).name
    student_token, teacher_token = student.session_state[state.ROOM_SIGN_IN], teacher.session_state[state.ROOM_SIGN_IN]

    current.held.clear()  # the server restarts: nothing of it in memory, the room's file read back

    back = browser(cookie=student_token)
    assert titles(back) != ["Two Bends — join the room"] and back.session_state[state.ROOM_ROLE] == "student"
    back.switch_page("pages/room/poll.py").run()
    radio = next(r for r in back.radio if r.key.startswith(state.POLL_CHOICE))
    assert radio.value == label  # its answer, given before the restart
    stranger = browser()  # a browser that never joined: the form, saying what happened
    assert titles(stranger) == ["Two Bends — join the room"] and any("restarted at" in c.value for c in stranger.caption)
    console_tab = browser(cookie=teacher_token)
    console_tab.switch_page("pages/room/teacher_console.py").run()
    assert not console_tab.exception and any("restarted at" in i.value for i in console_tab.info)
    assert name in console_tab.dataframe[0].value["name"].tolist()
    assert any("BRI-DGE" in m.value for m in console_tab.markdown)  # the join code, the same as before
    metrics = {m.label: m.value for m in console_tab.metric}
    assert metrics["Connected"] == "2" and metrics["Waiting"] == "0"  # the two members back (the stranger is not one)


def test_a_removed_students_cookie_no_longer_admits(room_env):
    teacher, student = enter(browser(), "valley9"), enter(browser(), "bridge")
    token = student.session_state[state.ROOM_SIGN_IN]
    assert browser(cookie=token).session_state[state.ROOM_ROLE] == "student"
    teacher.switch_page("pages/room/teacher_console.py").run()
    teacher.selectbox(key=console.REMOVE_PICK).set_value(current.room().member(student.session_state[SID]).member_id)
    teacher.button(key=console.REMOVE).click().run()
    assert not teacher.exception
    assert titles(browser(cookie=token)) == ["Two Bends — join the room"]
    student.run()
    assert titles(student) == ["Two Bends — join the room"]  # its open tab is sent back to the form too


def test_a_deep_link_lands_where_it_points_after_the_code(room_env):
    teacher = enter(browser(landing="console"), "valley9")
    assert titles(teacher) == ["Teacher console"]
    student = enter(browser(landing="timing"), "bridge")
    assert any("ledger" in t for t in titles(student))  # the Timing page (its title: the dispatcher's ledger)
    assert state.ROOM_LANDING not in student.session_state  # once: the next click goes where it asks
    other = enter(browser(landing="console"), "bridge")  # not a student's page: home
    assert "Teacher console" not in titles(other) and not other.exception


def test_a_students_locked_lab_shows_its_buttons_off_and_why(room_env):
    student = enter(browser(), "bridge")
    student.switch_page("pages/labs/lab_sweeps.py").run()
    assert not student.exception
    assert any("the lab measurements are the teacher's" in i.value for i in student.info)
    assert student.button(key=state.SWEEP_RUN).disabled and student.button(key=state.SWEEP_CANCEL).disabled
    assert not any("press **Run sweep**" in i.value for i in student.info)  # no invitation to press what is off
    current.room().set_locks(labs="all")  # the teacher opens the labs
    student.run()
    assert not student.button(key=state.SWEEP_RUN).disabled


def test_a_room_file_that_cannot_be_used_is_a_banner_for_the_teacher_and_the_room_works_on(room_env):
    (room_env / FILE_NAME).write_bytes(b"not a database " * 500)
    current.held.clear()
    student = enter(browser(), "bridge")
    assert student.session_state[state.ROOM_ROLE] == "student" and not student.error
    teacher = enter(browser(landing="console"), "valley9")
    banner = [e.value for e in teacher.error if "not being saved" in e.value]
    assert len(banner) == 1 and str(room_env / FILE_NAME) in banner[0]


def test_a_run_in_flight_when_the_server_died_is_told_interrupted_once_never_shown_finished(room_env, monkeypatch):

    token = "a-browser-token-from-before-the-restart-0123456789abcdef"
    keeper = Keeper(room_env)  # what the killed server left in the room's file: one run noted, never saved
    keeper.load(Room("BRIDGE"))
    keeper.flight_started("old-start:7", token, "64 → 32 tokens", since=1_000_000.0)
    keeper.close()
    current.held.clear()
    monkeypatch.setattr(browser_runs, "sent_token", lambda: token)  # this browser's runs cookie
    student = enter(browser(), "bridge")
    said = [w.value for w in student.warning if "stopped while it ran" in w.value]
    assert len(said) == 1 and "64 → 32 tokens" in said[0] and "Press Run again" in said[0]
    assert student.session_state[state.STORE].history == []  # nothing of it shown as finished
    assert current.keeper().flights() == []  # told: its note has left the file
    student.run()
    assert any("stopped while it ran" in w.value for w in student.warning)  # this session keeps saying it
    assert not any("stopped while it ran" in w.value for w in enter(browser(), "bridge").warning)  # said once
