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


@pytest.mark.parametrize("run, reruns_app", [("a timer's run alone", True), ("a whole-app run", False)])
def test_a_marker_left_by_a_run_that_never_drew_its_page_does_not_hold_the_student(student, monkeypatch, run,
                                                                                  reruns_app):
    """A whole-app run marked push 2 as the one it draws (presence) and ended before its page (a page switch or a
    rerun in between). The poll page's timer, running alone, must still take the student to the push; inside a
    whole-app run the marker is that run's own, and the run draws the page itself."""
    room, _ = student
    room.version, room.follow_page = 2, {"page": "decode", "params": {}}
    monkeypatch.setattr(follow, "_seen", lambda sid: 1)
    monkeypatch.setattr(poll_panel, "the_poll", lambda: None)
    monkeypatch.setattr(poll_panel.st, "info", lambda *a, **k: None)
    fragments = ["poll-timer"] if run == "a timer's run alone" else None
    monkeypatch.setattr(follow, "get_script_run_ctx", lambda: types.SimpleNamespace(fragment_ids_this_run=fragments))
    monkeypatch.setitem(follow._DRAWING, "sid-one-timer", 2)
    reruns = []
    monkeypatch.setattr(follow.st, "rerun", lambda scope="app": reruns.append(scope))
    poll_panel.student.__wrapped__()
    assert reruns == (["app"] if reruns_app else [])


def test_a_whole_app_run_starts_without_a_marker_an_earlier_run_left(student):
    """presence() is each whole-app run's start: a marker found there is an earlier run's, which never drew its page."""
    follow._DRAWING["sid-one-timer"] = 2
    try:
        follow.presence(types.SimpleNamespace(url_path="poll"), [])
        assert "sid-one-timer" not in follow._DRAWING
    finally:
        follow._DRAWING.pop("sid-one-timer", None)
