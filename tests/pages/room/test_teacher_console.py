"""The teacher console in AppTest: who is in the room, locks applied to a student's sidebar, follow-me, clearing."""
import itertools

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.room import config, console, current, follow

APP = str(ROOT / "app.py")
CONSOLE = "pages/room/teacher_console.py"
SID = "test_sid"  # AppTest gives every app the same session id: each test app gets its own here
_ids = itertools.count()


@pytest.fixture
def room_env(monkeypatch, navigation_only, tmp_path):
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")
    monkeypatch.setenv(config.ENV_DATA_DIR, str(tmp_path))  # the room's file: this test's own
    current.held.clear()  # a fresh Room for each test (st.cache_resource lives as long as the process)
    monkeypatch.setattr(current, "session_id", lambda: st.session_state.get(SID, "no-session"))


def _enter(code: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[SID] = f"session-{next(_ids)}"
    at.run()
    at.text_input(key=state.ROOM_CODE).set_value(code)
    at.button[0].click().run()
    assert not at.exception
    return at


def test_console_lists_the_room_and_its_locks_reach_a_students_sidebar(room_env):
    student = _enter("bridge")
    teacher = _enter("valley9")
    teacher.switch_page(CONSOLE).run()
    assert not teacher.exception and [t.value for t in teacher.title] == ["Teacher console"]
    shown = {m.label: m.value for m in teacher.metric}
    assert shown["Connected"] == "2" and shown["Running"] == "0"
    # a student's model settings are the teacher's, shown disabled
    student.run()
    assert student.sidebar.selectbox(key=state.MODEL).disabled
    assert student.sidebar.selectbox(key=state.DTYPE).disabled
    assert not student.sidebar.radio(key=state.KERNELS).disabled  # kernels stay free until locked
    # the teacher caps the lengths and locks the kernels
    teacher.number_input(key=console.LOCK_OUTPUT).set_value(16)
    teacher.number_input(key=console.LOCK_PROMPT).set_value(32)
    teacher.selectbox(key=console.LOCK_KERNELS).set_value("plain")
    teacher.button(key="FormSubmitter:room_locks-Apply to the room").click().run()
    assert not teacher.exception and any("Applied" in s.value for s in teacher.success)
    student.run()
    assert student.sidebar.slider(key=state.MAX_NEW_TOKENS).max == 16
    assert student.sidebar.slider(key=state.PROMPT_TOKENS).max == 32
    assert student.session_state[state.PROMPT_TOKENS] <= 32
    assert student.sidebar.radio(key=state.KERNELS).value == "plain" and student.sidebar.radio(key=state.KERNELS).disabled
    teacher.run()  # the teacher's own sidebar is not capped
    assert teacher.sidebar.slider(key=state.MAX_NEW_TOKENS).max == 512
    assert not teacher.sidebar.selectbox(key=state.MODEL).disabled


def test_follow_me_moves_a_student_to_the_teachers_page_and_settings(room_env):
    student = _enter("bridge")
    teacher = _enter("valley9")
    teacher.session_state[state.MAX_NEW_TOKENS] = 48
    teacher.switch_page("pages/story/decode.py").run()
    teacher.switch_page(CONSOLE).run()
    teacher.toggle(key=console.FOLLOW_TOGGLE).set_value(True).run()
    assert not teacher.exception and any("Students follow **decode**" in c.value for c in teacher.caption)
    student.run()
    assert not student.exception
    assert student.session_state[state.MAX_NEW_TOKENS] == 48
    assert any("Decode" in t.value for t in student.title)
    student.run()  # the page was drawn to its end: from the next run on, the push counts as seen
    assert student.session_state[follow.FOLLOW_SEEN] == current.room().following()[0]


def test_a_page_switch_lost_to_another_rerun_is_made_again(room_env, monkeypatch):
    """A rerun the browser asks for while the switch is pending (a fragment's timer) keeps the old page: the push
    must stay unseen until a run on the teacher's page, so the student's next look switches again."""
    student = _enter("bridge")
    teacher = _enter("valley9")
    teacher.switch_page("pages/story/decode.py").run()
    teacher.switch_page(CONSOLE).run()
    teacher.toggle(key=console.FOLLOW_TOGGLE).set_value(True).run()
    with monkeypatch.context() as lost:
        lost.setattr(follow.st, "switch_page", lambda target: st.stop())  # the run ends, still on its old page
        student.run()
    assert not any("Decode" in t.value for t in student.title)
    assert follow.FOLLOW_SEEN not in student.session_state
    student.run()  # the next look
    assert not student.exception and any("Decode" in t.value for t in student.title)
    student.run()
    assert student.session_state[follow.FOLLOW_SEEN] == current.room().following()[0]


def test_clearing_the_room_sends_students_back_to_the_code(room_env):
    student = _enter("bridge")
    teacher = _enter("valley9")
    teacher.switch_page(CONSOLE).run()
    assert teacher.button(key=console.CLEAR).disabled  # until the teacher confirms
    teacher.checkbox(key=console.CLEAR_SURE).check().run()
    teacher.button(key=console.CLEAR).click().run()
    assert not teacher.exception and any("Cleared: 1 student session" in s.value for s in teacher.success)
    assert not teacher.checkbox(key=console.CLEAR_SURE).value and teacher.button(key=console.CLEAR).disabled
    teacher.run()  # the console's next rerun (its refresh, another widget): the outcome stays on screen
    assert any("Cleared: 1 student session" in s.value for s in teacher.success)
    student.run()
    assert not student.exception
    assert [t.value for t in student.title] == ["Two Bends — join the room"]
    new_code = current.room().join_code
    assert new_code != "BRIDGE" and any(config.display(new_code) in s.value for s in teacher.success)
    student.text_input(key=state.ROOM_CODE).set_value("bridge")  # the old code no longer opens the room
    student.button[0].click().run()
    assert any("not this room's" in e.value for e in student.error)
    student.text_input(key=state.ROOM_CODE).set_value(new_code)
    student.button[0].click().run()
    assert not student.exception and student.session_state[state.ROOM_ROLE] == "student"
    assert len(current.room().snapshot()) == 2


def test_a_student_never_sees_the_console(room_env):
    student = _enter("bridge")
    assert not student.exception
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        student.switch_page(CONSOLE)  # not in a student's navigation at all


def test_console_says_how_many_students_this_machine_holds(room_env, monkeypatch, tmp_path):
    from ui.room import room_size

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the user's data folder: this test's own
    console._size.clear()
    _enter("bridge")
    teacher = _enter("valley9")
    teacher.switch_page(CONSOLE).run()
    said = [c.value for c in teacher.caption if "This machine holds" in c.value]
    assert said and "an estimate" in said[0] and "you have 1" in said[0]  # nothing measured here: labelled

    result = room_size.new_result(room_size.socket.gethostname(), 2, "smollm2-135m", 60.0)
    result["modes"] = {"queue": {"students": 1, "every_size_held": False}, "batch": {"students": 1}}
    room_size.save(result)
    console._size.clear()
    _enter("bridge")  # two students now: past the measured one
    teacher.run()
    past = [e.value for e in teacher.error if "This machine holds" in e.value]
    assert past and "measured by" in past[0] and "you have 2" in past[0] and "--engine-url" in past[0]
