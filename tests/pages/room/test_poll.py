"""AppTest of pages/room/poll.py through app.py: alone (predict, then measure for yourself) and in room mode (a teacher
and students sharing one Room: answers hidden until the reveal, locked at Measure, a revote as a new round, the
histogram with its text, one Measure at a time, bad question files)."""
import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.room import config, current, polls

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
def room_env(monkeypatch, tmp_path):
    import streamlit as st
    monkeypatch.setattr(current, "session_id", lambda: st.session_state.get(SID, "test session id"))
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")
    monkeypatch.setenv(config.ENV_DATA_DIR, str(tmp_path))  # the room's file: this test's own
    current.held.clear()  # the Room is one per server (cache_resource): each test starts from an empty room
    yield tmp_path
    current.held.clear()


def test_alone_predict_then_measure_for_yourself(monkeypatch, navigation_only):
    monkeypatch.delenv(config.ENV_ROOM, raising=False)
    at = open_poll_page()
    no_exception(at)
    assert [t.value for t in at.title][-1] == "Predict, then measure"
    at.selectbox(key=state.POLL_PICK).set_value("double-the-prompt")
    at.button(key=state.POLL_OPEN).click().run()
    no_exception(at)
    poll = at.session_state[state.POLL_SOLO]
    radio = next(r for r in at.radio if r.key.startswith(state.POLL_CHOICE))
    radio.set_value(poll.question.options[1].label).run()
    assert poll.counts() == [0, 1, 0]
    assert any("Your answer" in s.value for s in at.success)
    at.button(key=state.POLL_MEASURE).click().run()
    no_exception(at)
    assert poll.measured is not None and poll.measuring_since is None and not poll.open
    metric = next(m for m in at.metric if m.label == "Measured on this engine")
    assert metric.value.startswith("×")
    assert any("TTFT ×" in c.value and "FLOP count" in c.value for c in at.caption)
    assert any("The measurement answers" in m.value for m in at.markdown)
    chosen = poll.question.options[poll.matched]
    assert any(chosen.explain in m.value for m in at.markdown)  # the explanation of the option the figure landed in
    assert any(m.value.startswith("The room's answers, 1 in all") for m in at.markdown)  # readable as text


def answer(at: AppTest, label: str) -> None:
    at.run()
    next(r for r in at.radio if r.key.startswith(state.POLL_CHOICE)).set_value(label).run()
    no_exception(at)


def test_room_answers_stay_hidden_until_measured_and_lock_at_measure(room_env, navigation_only):
    teacher = open_poll_page("valley9")
    no_exception(teacher)
    students = [open_poll_page("bridge", f"student-{i}") for i in range(3)]
    assert any("No question yet" in i.value for i in students[0].info)
    assert not any(b.key == state.POLL_MEASURE for b in students[0].button)  # only the teacher measures
    teacher.selectbox(key=state.POLL_PICK).set_value("double-the-prompt")
    teacher.button(key=state.POLL_OPEN).click().run()
    poll = current.room().poll
    labels = [o.label for o in poll.question.options]
    for at, choice in zip(students, [labels[1], labels[1], labels[2]]):
        answer(at, choice)
    assert poll.counts() == [0, 2, 1]
    teacher.run()
    assert any("3** answers from 3 students" in c.value and "hidden" in c.value for c in teacher.caption)
    assert not teacher.get("plotly_chart")  # the projector shows no histogram before the reveal
    students[0].run()
    assert not students[0].get("plotly_chart") and any("when the teacher reveals" in c.value for c in students[0].caption)
    teacher.button(key=state.POLL_MEASURE).click().run()
    no_exception(teacher)
    assert poll.measured is not None and poll.matched in (0, 1, 2) and not poll.open
    late = students[2]
    late.run()
    radio = next(r for r in late.radio if r.key.startswith(state.POLL_CHOICE))
    assert radio.disabled  # locked at Measure: the answer given before it is the one that counts
    assert poll.counts() == [0, 2, 1]
    students[0].run()
    assert any(m.label == "Measured on this engine" for m in students[0].metric)
    assert students[0].get("plotly_chart")
    teacher.run()
    assert teacher.button(key=state.POLL_CLOSE).disabled  # measured answers cannot be unlocked


def test_reveal_then_revote_is_a_new_round_and_the_first_round_stays(room_env, navigation_only):
    teacher = open_poll_page("valley9")
    students = [open_poll_page("bridge", f"student-{i}") for i in range(2)]
    teacher.selectbox(key=state.POLL_PICK).set_value("eight-riders")
    teacher.button(key=state.POLL_OPEN).click().run()
    first = current.room().poll
    labels = [o.label for o in first.question.options]
    answer(students[0], labels[2])
    answer(students[1], labels[0])
    assert teacher.button(key=state.POLL_REVOTE).disabled  # a revote follows a reveal
    teacher.button(key=state.POLL_REVEAL).click().run()
    no_exception(teacher)
    assert first.revealed and not first.open and teacher.get("plotly_chart")
    assert any(m.value.startswith("The room's answers, 2 in all") for m in teacher.markdown)
    students[0].run()
    assert students[0].get("plotly_chart")  # revealed: the room sees its answers
    teacher.button(key=state.POLL_REVOTE).click().run()
    no_exception(teacher)
    second = current.room().poll
    assert second is not first and second.round == 2 and second.counts() == [0, 0, 0] and not second.revealed
    answer(students[0], labels[1])
    assert first.counts() == [1, 0, 1] and second.counts() == [0, 1, 0]
    assert current.room().all_rounds()[-2:] == [first, second]  # the room's rounds, whichever tab opened them
    rows = polls.csv_rows(current.room().all_rounds())
    assert {r["round"] for r in rows} == {1, 2}


def test_a_student_whose_tab_closed_is_not_counted_in_the_room(room_env, navigation_only, monkeypatch):
    from ui.room import sessions
    teacher = open_poll_page("valley9")
    for i in range(3):
        open_poll_page("bridge", f"student-{i}")
    teacher.selectbox(key=state.POLL_PICK).set_value("double-the-prompt")
    teacher.button(key=state.POLL_OPEN).click().run()
    assert any("**0** answers from 3 students" in c.value for c in teacher.caption)
    monkeypatch.setattr(sessions, "sessions_alive", lambda ids: set(ids) - {"student-1"})  # that tab closed
    teacher.run()
    assert any("**0** answers from 2 students" in c.value for c in teacher.caption)
    assert "student-1" not in {sid for m in current.room().present() for sid in m.sessions}
    assert len(current.room().snapshot()) == 4  # the student is away, still a member (a reload brings them back)


def test_a_second_measure_while_one_runs_gets_one_clear_line(room_env, navigation_only):
    teacher = open_poll_page("valley9")
    teacher.button(key=state.POLL_OPEN).click().run()
    current.room().poll.begin_measure()  # another teacher tab's measurement is running
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

