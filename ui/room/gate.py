"""The room's gate: in room mode no page, lab, download or engine call until the session entered a code.

`admit()` is the first thing app.py does. Outside room mode it returns "solo" (one person, one machine, everything
open). In room mode it returns "teacher" or "student" for an admitted session, and otherwise draws the join form
and stops the script. A browser that joined before is back in without the code: its sign-in cookie holds a token the
room signed (ui/room/signing.py), good across reloads, prepared links and the server's restart, until the teacher
clears the room or removes that student. A deep link (`/console`, `/timing`) opened before the code lands where it
points once the code is in (`land`). The Room is one per server (ui/room/current.py), and so is the Throttle that
slows down wrong codes per client (ui/room/throttle.py: the browser session and, where Streamlit sees it, the remote
address). Nothing above admit() in app.py touches the engine: no worker starts, no model loads without the code.
"""
from __future__ import annotations

import json
import time

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.room import config, current
from ui.room.admission import Admission
from ui.room.throttle import client_keys

COOKIE = "two_bends_room"  # the browser's sign-in token for this room
COOKIE_MAX_AGE_S = 7 * 24 * 3600  # a week of workshops; clearing the room ends it sooner
COOKIE_SCRIPT = """<script>document.cookie = {cookie};</script>"""
WELCOME_BACK_S = 15 * 60  # a returning member is told about a restart this long after it


def _client() -> list[str]:
    try:
        address = st.context.ip_address  # None on localhost and in AppTest
    except Exception:  # noqa: BLE001 -- an older Streamlit without it: the session alone is the client
        address = None
    return client_keys(current.session_id(), address)


def _seconds(wait: float) -> str:
    return f"{wait:.0f} s" if wait < 90 else f"{wait / 60:.0f} min"


def check(code: str) -> tuple[str | None, str]:
    """(role or None, the one line to show) for a code typed into the form; wrong codes count for this client."""
    room = current.room()
    if not room.join_code:
        return None, "This room has no join code set: the teacher starts it with `bash scripts/dashboard.sh --room`."
    given = config.normalise(code)
    if not given:
        return None, "Type the room's code first: it is shown on the projector."
    if len(given) > config.MAX_CODE_LEN:
        return None, f"That is longer than any room code (at most {config.MAX_CODE_LEN} characters): check the projector."
    keys = _client()
    wait = current.throttle().wait_left(keys)
    if wait > 0:
        return None, f"Too many wrong codes from this browser: wait {_seconds(wait)}, then try again."
    got = room.role_for(given)
    if got is None:
        wait = current.throttle().failed(keys)
        later = f" The next try is possible in {_seconds(wait)}." if wait > 0 else ""
        return None, "That code is not this room's. Check the projector and try again." + later
    current.throttle().succeeded(keys)
    return got, ""


def _cookie() -> str | None:
    try:
        return st.context.cookies.get(COOKIE)
    except Exception:  # noqa: BLE001 -- no cookies outside a browser's request (AppTest): not signed in
        return None


def restart_note(room) -> str:
    """One line about the server's restart, when this room was read back from its file ('' otherwise)."""
    if room.restarted_at is None:
        return ""
    at = time.strftime("%H:%M", time.localtime(room.restarted_at))
    return (f"The room's server restarted at {at}; everything it had saved was kept: the same code, the members, "
            "every poll round with its answers, the runs.")


def admit() -> str:
    cfg = current.settings()
    if not cfg.enabled:
        return "solo"
    ss = st.session_state
    if ss.get(state.ROOM_ROLE):
        return _admitted(ss[state.ROOM_ROLE])
    room = current.room()
    member = room.returning(_cookie())  # a reload, a prepared link, the server's restart: back in without the code
    if member is not None:
        ss[state.ROOM_ROLE] = member.role
        if room.restarted_at and member.joined < room.restarted_at and time.time() - room.restarted_at < WELCOME_BACK_S:
            st.toast(restart_note(room), icon=":material/restart_alt:")
        return _admitted(member.role, member.member_id)
    _remember_landing()
    st.title("Two Bends — join the room")
    if note := restart_note(room):
        st.caption(note)
    with st.form(key=state.ROOM_FORM):
        code = st.text_input("Room code (on the projector)", key=state.ROOM_CODE,
                             max_chars=4 * config.MAX_CODE_LEN)  # longer than any code: one clear line, below
        entered = st.form_submit_button("Join", type="primary")
    if entered:
        got, message = check(code)
        if got is None:
            st.error(message)
        else:
            ss[state.ROOM_ROLE] = got
            _admitted(got)
            st.rerun()
    st.stop()


def _admitted(role: str, member_id: str | None = None) -> str:
    """This session is in the room as `role`: on the roster (its browser's member), signed in for its next visit, with
    the rules the engine link asks before it submits anything (ui/room/admission.py)."""
    sid, room = current.session_id(), current.room()
    member = room.join(sid, role, member_id)
    if member.member_id:
        st.session_state[state.ROOM_SIGN_IN] = room.sign_in_token(member)
    st.session_state[state.ROOM_RULES] = Admission(room, current.slots(), sid, role, current.saver())
    return role


def remember() -> None:
    """The tiny script that keeps this session's sign-in in its browser (a cookie; no element shows, the token is
    never in a link). Drawn on every run of an admitted session, like the browser's runs' cookie."""
    token = st.session_state.get(state.ROOM_SIGN_IN)
    if not token or current.role() not in ("teacher", "student"):
        return
    cookie = json.dumps(f"{COOKIE}={token}; path=/; max-age={COOKIE_MAX_AGE_S}; SameSite=Strict")
    with st.sidebar.container(key=state.ROOM_COOKIE, height=1, border=False):
        st.html(COOKIE_SCRIPT.format(cookie=cookie), unsafe_allow_javascript=True)


def _remember_landing() -> None:
    """The page a deep link asked for before the code (its URL path), so the session lands there once admitted."""
    ctx = get_script_run_ctx()
    asked = getattr(getattr(ctx, "pages_manager", None), "intended_page_name", None) if ctx is not None else None
    if asked and state.ROOM_LANDING not in st.session_state:
        st.session_state[state.ROOM_LANDING] = asked


def land(page, pages: list) -> None:
    """After the code: the page the deep link pointed at (a student's `/console` stays home: not theirs), once."""
    target = st.session_state.pop(state.ROOM_LANDING, None)
    if not target or target == (page.url_path or ""):
        return
    by_path = {p.url_path: p for p in pages if p.url_path}
    if target in by_path:
        st.switch_page(by_path[target], query_params=st.query_params.to_dict())
