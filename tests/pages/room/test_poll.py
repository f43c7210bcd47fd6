"""AppTest of pages/room/poll.py through app.py: alone (predict, then measure for yourself) and in room mode (a teacher
and students sharing one Room: answers, histogram, one Measure at a time, bad question files)."""
import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.classroom import config
from ui.room import gate, polls

APP = str(ROOT / "app.py")
PAGE = "pages/room/poll.py"


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def open_poll_page(code: str | None = None, sid: str = "") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    if sid:
        at.session_state[SID] = sid
    at.run()
    if code is not None:
        at.text_input(key=state.ROOM_CODE).set_value(code)
        at.button[0].click().run()
    at.switch_page(PAGE)
    return at.run()


SID = "test_session_id"  # AppTest gives every session the same id: a test names its sessions apart


@pytest.fixture
def room_env(monkeypatch):
    import streamlit as st
    monkeypatch.setattr(gate, "session_id", lambda: st.session_state.get(SID, "test session id"))
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")
    gate.room.clear()  # the Room is one per server (cache_resource): each test starts from an empty room
    yield
    gate.room.clear()


def test_alone_predict_then_measure_for_yourself(monkeypatch, navigation_only):
    monkeypatch.delenv(config.ENV_ROOM, raising=False)
    at = open_poll_page()
    no_exception(at)
    assert [t.value for t in at.title][-1] == "Predict, then measure"
    at.selectbox(key=state.POLL_PICK).set_value("double-the-output")
    at.button(key=state.POLL_OPEN).click().run()
    no_exception(at)
    poll = at.session_state[state.POLL_SOLO]
    radio = next(r for r in at.radio if r.key.startswith(state.POLL_CHOICE))
    radio.set_value("×1 — about the same per token").run()
    assert poll.counts() == [0, 1, 0]
    assert any("Your answer" in s.value for s in at.success)
    at.button(key=state.POLL_MEASURE).click().run()
    no_exception(at)
    assert poll.measured is not None and poll.measuring_since is None
    metric = next(m for m in at.metric if m.label == "Measured on this engine")
    assert metric.value.startswith("×")
    assert any("TPOT ×" in c.value for c in at.caption)
    assert any("The measurement answers" in m.value for m in at.markdown)


def test_room_students_answer_the_teachers_question_and_see_it_measured(room_env, navigation_only):
    teacher = open_poll_page("valley9")
    no_exception(teacher)
    students = [open_poll_page("bridge", f"student-{i}") for i in range(3)]
    assert any("No question yet" in i.value for i in students[0].info)
    assert not any(b.key == state.POLL_MEASURE for b in students[0].button)  # only the teacher measures
    teacher.selectbox(key=state.POLL_PICK).set_value("double-the-output")
    teacher.button(key=state.POLL_OPEN).click().run()
    poll = gate.room().poll
    assert poll is not None
    for at, choice in zip(students, ["×1 — about the same per token"] * 2 + ["×2 — each token costs twice as much"]):
        at.run()
        next(r for r in at.radio if r.key.startswith(state.POLL_CHOICE)).set_value(choice).run()
        no_exception(at)
    assert poll.counts() == [0, 2, 1]
    teacher.run()
    assert any("3** answers from 3 students" in c.value for c in teacher.caption)
    teacher.button(key=state.POLL_CLOSE).click().run()
    assert not poll.open
    late = students[2]
    late.run()
    assert next(r for r in late.radio if r.key.startswith(state.POLL_CHOICE)).disabled
    teacher.button(key=state.POLL_MEASURE).click().run()
    no_exception(teacher)
    assert poll.measured is not None and poll.matched in (0, 1, 2)
    students[0].run()
    assert any(m.label == "Measured on this engine" for m in students[0].metric)


def test_a_student_whose_tab_closed_is_not_counted_in_the_room(room_env, navigation_only, monkeypatch):
    from ui.engine_link import room_sessions
    teacher = open_poll_page("valley9")
    for i in range(3):
        open_poll_page("bridge", f"student-{i}")
    teacher.selectbox(key=state.POLL_PICK).set_value("double-the-output")
    teacher.button(key=state.POLL_OPEN).click().run()
    assert any("**0** answers from 3 students" in c.value for c in teacher.caption)
    monkeypatch.setattr(room_sessions, "sessions_alive", lambda ids: set(ids) - {"student-1"})  # that tab closed
    teacher.run()
    assert any("**0** answers from 2 students" in c.value for c in teacher.caption)
    assert "student-1" not in {m.session_id for m in gate.room().snapshot()}


def test_a_second_measure_while_one_runs_gets_one_clear_line(room_env, navigation_only):
    teacher = open_poll_page("valley9")
    teacher.button(key=state.POLL_OPEN).click().run()
    gate.room().poll.begin_measure()  # another teacher tab's measurement is running
    teacher.button(key=state.POLL_MEASURE).click().run()
    no_exception(teacher)
    errors = [e.value for e in teacher.error]
    assert len(errors) == 1 and "already running" in errors[0] and "\n" not in errors[0]


def test_a_bad_question_file_gets_one_line_and_the_rest_load(tmp_path, monkeypatch, navigation_only):
    monkeypatch.delenv(config.ENV_ROOM, raising=False)
    for f in polls.BANK_DIR.glob("*.json"):
        shutil.copy(f, tmp_path)
    (tmp_path / "9-broken.json").write_text(json.dumps({"question": "Which?", "options": ["only one"]}))
    monkeypatch.setattr(polls, "BANK_DIR", tmp_path)
    at = open_poll_page()
    no_exception(at)
    warnings = [w.value for w in at.warning if "9-broken.json" in w.value]
    assert len(warnings) == 1 and "2 to 8" in warnings[0]
    assert len(at.selectbox(key=state.POLL_PICK).options) == len(list(polls.BANK_DIR.glob("*.json"))) - 1

