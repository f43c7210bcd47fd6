"""A session's place in the room, once per script run: presence, the teacher's locks, follow-me, eviction.

app.py calls `presence(page, pages)` right after st.navigation: it tells the Room this session's page and says which of
this browser's runs the server's restart cut short; a student cleared out of the room goes back to the join form; a
student's model, device and dtype become the teacher's (locked); with follow-me on, a student's page and link settings
follow the teacher's, each push applied once. A small fragment re-checks every few seconds, so a push reaches a student
who is only watching. Outside room mode: nothing.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.demo import links
from ui.engine_link import server_link, worker_link
from ui.room import current
from ui.text import prompts

CONSOLE_PATH = "console"  # the teacher console's URL path: never a page students follow
FOLLOW_SEEN = "room_follow_seen"  # the follow-me version this session applied last
# Per session id, outside session state (after st.stop() every session-state write raises the stop again): the push
# version a whole-app run is drawing (set in presence, removed when the run ends, whole or cut short) and the version
# whose page was drawn to its end. A session's runs never overlap (one script thread each), so an entry found when a
# run starts, or by a timer's fragment-only run, was left by a whole-app run that ended before drawing() (a page switch
# or a rerun between presence and the page): it is dropped there, or the student's next look would wait on it forever.
_DRAWING: dict[str, int] = {}
_DRAWN: dict[str, int] = {}
_LOCK = threading.Lock()
WATCH_EVERY_S = 3.0  # how often a student's page looks for a push or an eviction
# pages whose own timer fragment looks for a push or an eviction (calling `look()`), so that a student's page runs one
# timer, not two: Streamlit 1.67's frontend can lose a tab ("Bad delta path index") when a rerun meets a timer run
OWN_TIMER = {"poll"}  # the student's poll view (ui/room/poll_panel.student)
SPEC_KEYS = {"model": state.MODEL, "device": state.DEVICE, "dtype": state.DTYPE, "kernels": state.KERNELS}
FOLLOWED = [name for name in links.PARAMS if name != "present"]  # presenter mode stays each screen's own


def _server_spec() -> dict:
    """The model the server loaded at start, on the default device and dtype (before the teacher chose any)."""
    spec = server_link.options().preload
    return {"model": spec.name, "device": spec.device, "dtype": spec.dtype}


def presence(page, pages: list) -> None:
    role = current.role()
    if role not in ("teacher", "student"):
        return
    room, sid = current.room(), current.session_id()
    if role == "student" and room.is_evicted(sid):
        room.readmit(sid)
        st.session_state.pop(state.ROOM_ROLE, None)  # back to the join form (its browser's sign-in no longer admits it)
        st.session_state.pop(state.ROOM_SIGN_IN, None)
        st.rerun()
    ss = st.session_state
    if role == "teacher":
        room.note_teacher({name: ss.get(key) for name, key in SPEC_KEYS.items() if key in ss},
                          "" if links.page_path(page) == CONSOLE_PATH else links.page_path(page))
        if room.following()[1] is not None:
            push(room)
    else:
        with _LOCK:
            drawn = _DRAWN.pop(sid, None)
            _DRAWING.pop(sid, None)  # left by an earlier run that ended before its page (see _DRAWING)
        if drawn is not None:
            ss[FOLLOW_SEEN] = drawn
        enforce_locks()
        _apply_follow(page, pages, sid)
    room.touch(sid, page=links.page_path(page), browser=worker_link.store().runs.token)
    interrupted_notice()
    if role == "student" and links.page_path(page) not in OWN_TIMER:
        with st.sidebar:  # the sidebar's first element on every page: a fixed place, never where a page draws
            _watch()  # (in the main area a timer run of the old page's fragment once overwrote the new page's title)


def push(room=None) -> None:
    """The teacher's current page (not the console) and request settings become what students follow."""
    room = room or current.room()
    ss = st.session_state
    params = links.build({links.PARAMS[n].key: ss[links.PARAMS[n].key] for n in FOLLOWED if links.PARAMS[n].key in ss})
    room.set_follow(room.teacher_page or links.HOME, params)


def enforce_locks() -> None:
    """A student's model settings are the teacher's; its lengths stay under the teacher's caps."""
    if current.role() != "student":
        return
    ss = st.session_state
    for name, value in current.room().student_spec(_server_spec()).items():
        ss[SPEC_KEYS[name]] = value
    caps = length_caps()
    for key, cap in ((state.PROMPT_TOKENS, caps[0]), (state.MAX_NEW_TOKENS, caps[1])):
        if cap is not None and key in ss and int(ss[key]) > cap:
            ss[key] = cap


def locked_keys() -> set[str]:
    """The sidebar keys a student may not change (empty for the teacher and outside room mode)."""
    if current.role() != "student":
        return set()
    return {SPEC_KEYS[name] for name in current.room().student_spec(_server_spec())}


def length_caps() -> tuple[int | None, int | None]:
    """The teacher's maximum prompt and output lengths for this session (None: no cap)."""
    if current.role() != "student":
        return None, None
    locks = current.room().locks
    return locks.max_prompt_tokens, locks.max_output_tokens


def _apply_follow(page, pages: list, sid: str) -> None:
    """Apply the teacher's latest push: its settings, then its page. The push counts as seen only once a run on that
    page has drawn it to its end (`drawing`): a rerun the browser asks for meanwhile (a fragment's timer) replaces a
    pending page switch with its own page (Streamlit keeps the newest request's page), or cuts the new page's run
    short, and the next look (`_watch`) must then switch or draw again."""
    version, follow = current.room().following()
    ss = st.session_state
    if follow is None or ss.get(FOLLOW_SEEN) == version:
        return
    parsed = links.parse(follow["params"], set(), set())
    ss.update({links.PARAMS[name].key: links.PARAMS[name].default for name in FOLLOWED})  # the link omits defaults
    ss.update(parsed.values)
    ss[state.PROMPT] = prompts.example(ss[state.EXAMPLE]).text
    enforce_locks()  # the teacher's lengths still under the caps
    by_path = {links.page_path(p): p for p in pages}
    target = by_path.get(follow["page"])
    if target is not None and target is not page and follow["page"] != links.page_path(page):
        st.switch_page(target)  # ends this run; the run on the target page marks the push seen
    with _LOCK:
        _DRAWING[sid] = version


@contextmanager
def drawing() -> Iterator[None]:
    """Around app.py's page.run(): a push whose page ran to its end (or to its own st.stop()) counts as seen at the
    session's next run. A run cut short by another rerun leaves it unseen, so the student's next look reruns the app
    and draws the page whole. Outside room mode and for the teacher: nothing."""
    sid = current.session_id() if current.role() == "student" else None
    try:
        yield
    except StopException:
        _drawn(sid)
        raise
    else:
        _drawn(sid)
    finally:
        with _LOCK:
            _DRAWING.pop(sid, None)


def _drawn(sid: str | None) -> None:
    with _LOCK:
        if sid in _DRAWING:
            _DRAWN[sid] = _DRAWING.pop(sid)


def _seen(sid: str) -> int | None:
    """The last push this session drew whole (also when its session state has not heard yet)."""
    with _LOCK:
        drawn = _DRAWN.get(sid)
    return drawn if drawn is not None else st.session_state.get(FOLLOW_SEEN)


def interrupted_notice() -> None:
    """Runs of this browser that the server's restart cut short: said once per session, and until a run finishes."""
    ss, store = st.session_state, worker_link.store()
    runs = store.runs
    if runs.interrupted:
        lines = [f"{what} (sent at {time.strftime('%H:%M', time.localtime(since))})" for _, what, since in runs.interrupted]
        ss[state.ROOM_INTERRUPTED] = (len(store.history), "The room's server stopped while it ran this browser's "
                                      + ("runs " if len(lines) > 1 else "run ") + "; ".join(lines)
                                      + ": it did not finish and nothing of it is shown as finished. Press Run again.")
        current.saver().seen_interrupted(runs)
    shown = ss.get(state.ROOM_INTERRUPTED)
    if shown is not None:
        if len(store.history) > shown[0]:
            del ss[state.ROOM_INTERRUPTED]  # a run finished since: the note has done its work
        else:
            st.warning(shown[1], icon=":material/restart_alt:")


@st.fragment(run_every=WATCH_EVERY_S)
def _watch() -> None:
    """A student's page looks for a new push or an eviction every few seconds, and reruns the app for it."""
    look()


def look() -> None:
    """Rerun the whole app when this student has a push to follow or was evicted; called by a timer fragment (this
    module's, or the page's own on OWN_TIMER pages). Outside a room, and for the teacher: nothing."""
    if current.role() != "student":
        return
    room, sid = current.room(), current.session_id()
    version, follow = room.following()
    ctx = get_script_run_ctx()
    with _LOCK:
        if ctx is not None and ctx.fragment_ids_this_run:  # a timer's run alone: no whole-app run is drawing now
            _DRAWING.pop(sid, None)
        drawing_now = _DRAWING.get(sid) == version  # this very run draws the push's page
    if room.is_evicted(sid) or (follow is not None and _seen(sid) != version and not drawing_now):
        st.rerun(scope="app")
