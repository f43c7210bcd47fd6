"""A student's page runs one timer fragment: the sidebar's follow-me watch, except on pages whose own timer looks for
a push (follow.OWN_TIMER: the poll page's student view), where a second timer would double the reruns that meet
Streamlit's frontend mid-update ("Bad delta path index", a blank tab)."""
import types

import pytest

from ui.room import current, follow, poll_panel


class _Room:
    def __init__(self, version=0, follow_page=None, evicted=False):
        self.version, self.follow_page, self.evicted = version, follow_page, evicted

    def is_evicted(self, sid):
        return self.evicted

    def following(self):
        return self.version, self.follow_page

    def touch(self, *args, **kwargs):
        pass


@pytest.fixture
def student(monkeypatch):
    room = _Room()
    monkeypatch.setattr(current, "role", lambda: "student")
    monkeypatch.setattr(current, "session_id", lambda: "sid-one-timer")
    monkeypatch.setattr(current, "room", lambda: room)
    for name in ("enforce_locks", "_apply_follow", "interrupted_notice"):
        monkeypatch.setattr(follow, name, lambda *a, **k: None)
    monkeypatch.setattr(follow.worker_link, "store", lambda: types.SimpleNamespace(runs=types.SimpleNamespace(token="t")))
    watched = []
    monkeypatch.setattr(follow, "_watch", lambda: watched.append(True))
    return room, watched


@pytest.mark.parametrize("path, sidebar_timer", [("decode", True), ("", True), ("poll", False)])
def test_the_sidebar_timer_runs_only_where_the_page_has_none_of_its_own(student, path, sidebar_timer):
    _, watched = student
    follow.presence(types.SimpleNamespace(url_path=path), [])
    assert bool(watched) == sidebar_timer


def test_the_poll_pages_own_timer_looks_for_a_push(student, monkeypatch):
    room, _ = student
    room.version, room.follow_page = 2, {"page": "decode", "params": {}}  # a push this student has not drawn
    monkeypatch.setattr(follow, "_seen", lambda sid: 1)
    monkeypatch.setattr(poll_panel, "the_poll", lambda: None)
    monkeypatch.setattr(poll_panel.st, "info", lambda *a, **k: None)
    reruns = []
    monkeypatch.setattr(follow.st, "rerun", lambda scope="app": reruns.append(scope))
    poll_panel.student.__wrapped__()  # the fragment's body, as each of its timer runs runs it
    assert reruns == ["app"]
    room.version = 1  # drawn already: nothing to do
    poll_panel.student.__wrapped__()
    assert reruns == ["app"]
