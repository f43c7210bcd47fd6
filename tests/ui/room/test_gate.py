"""Room mode's gate in AppTest: outside room mode nothing changes; in room mode nothing runs before the code."""
import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.engine_link import worker_link
from ui.room import config, current

APP = str(ROOT / "app.py")


@pytest.fixture
def room_env(monkeypatch, tmp_path):
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")
    monkeypatch.setenv(config.ENV_DATA_DIR, str(tmp_path))
    current.throttle.clear()  # one Throttle per server: each test starts with a clean record
    current.held.clear()  # ... and one room
    yield
    current.throttle.clear()
    current.held.clear()


def submit(at, code):
    at.text_input(key=state.ROOM_CODE).set_value(code)
    at.button[0].click().run()
    return " ".join(e.value for e in at.error)


def test_room_mode_shows_only_the_join_form_until_the_code(room_env, navigation_only):
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Two Bends — join the room"]
    assert len(at.sidebar.button) == 0  # no Run, no sidebar controls
    at.text_input(key=state.ROOM_CODE).set_value("nope")
    at.button[0].click().run()
    assert any("not this room's" in e.value for e in at.error)
    at.text_input(key=state.ROOM_CODE).set_value("bridge")
    at.button[0].click().run()
    assert not at.exception and at.session_state[state.ROOM_ROLE] == "student"
    assert "join the room" not in " ".join(t.value for t in at.title)


def test_outside_room_mode_there_is_no_gate(monkeypatch, navigation_only):
    monkeypatch.delenv(config.ENV_ROOM, raising=False)
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception and "join the room" not in " ".join(t.value for t in at.title)


def test_wrong_codes_are_slowed_down_and_even_the_right_one_waits(room_env, navigation_only):
    at = AppTest.from_file(APP, default_timeout=120).run()
    for _ in range(3):  # typos are free
        assert "next try" not in submit(at, "WRONG1")
    assert "next try is possible in 2 s" in submit(at, "WRONG1")
    assert "Too many wrong codes" in submit(at, "bridge")  # not even looked at during the wait
    assert state.ROOM_ROLE not in at.session_state


def test_empty_and_overlong_codes_get_one_clear_line(room_env, navigation_only):
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert submit(at, "   ") == "Type the room's code first: it is shown on the projector."
    assert "longer than any room code" in submit(at, "X" * (config.MAX_CODE_LEN + 1))
    assert len(at.error) == 1
    assert all("next try" not in submit(at, "WRONG1") for _ in range(3))  # neither counted as a wrong code


def test_nothing_touches_the_engine_before_the_code(room_env, navigation_only, monkeypatch):
    calls = []
    monkeypatch.setattr(worker_link, "link", lambda: calls.append("link") or pytest.fail("engine touched"))
    monkeypatch.setattr(worker_link, "remember_browser", lambda: calls.append("cookie"))
    at = AppTest.from_file(APP, default_timeout=120).run()
    submit(at, "WRONG1")
    assert not at.exception and calls == [] and len(at.sidebar) == 0


def test_the_teacher_code_admits_as_teacher_with_the_console(room_env, navigation_only):
    at = AppTest.from_file(APP, default_timeout=120).run()
    submit(at, "valley-9")
    assert not at.exception and at.session_state[state.ROOM_ROLE] == "teacher"
    at.switch_page("pages/room/teacher_console.py").run()
    assert not at.exception and not at.error


def test_a_room_without_a_join_code_admits_nobody(room_env, navigation_only, monkeypatch):
    monkeypatch.delenv(config.ENV_JOIN)
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert "no join code set" in submit(at, "VALLEY9")
    assert state.ROOM_ROLE not in at.session_state
