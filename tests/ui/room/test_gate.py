"""Room mode's gate in AppTest: outside room mode nothing changes; in room mode nothing runs before the code."""
import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state
from ui.room import config

APP = str(ROOT / "app.py")


@pytest.fixture
def room_env(monkeypatch):
    monkeypatch.setenv(config.ENV_ROOM, "1")
    monkeypatch.setenv(config.ENV_JOIN, "BRIDGE")
    monkeypatch.setenv(config.ENV_TEACHER, "VALLEY9")


def test_codes_compare_case_and_dash_insensitively():
    cfg = config.RoomConfig(True, "BRIDGE", "VALLEY9")
    assert config.role_for("bri-dge", cfg) == "student"
    assert config.role_for(" valley9 ", cfg) == "teacher"
    assert config.role_for("BRIDG", cfg) is None and config.role_for("", cfg) is None
    assert not config.matches("x", "")  # no code set: nothing matches


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
