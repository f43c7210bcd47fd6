"""The room's gate: in room mode no page, lab, download or engine call until the session entered a code.

`admit()` is the first thing app.py does. Outside room mode it returns "solo" (one person, one machine, everything
open). In room mode it returns "teacher" or "student" for an admitted session, and otherwise draws the join form
and stops the script. The Room (ui/room/registry.py) is one per server (ui/room/current.py), and so is the Throttle that slows down
wrong codes per client (ui/room/throttle.py: the browser session and, where Streamlit sees it, the remote address).
Nothing above admit() in app.py touches the engine: no worker starts, no model loads for a session without the code.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.room import config, current
from ui.room.admission import Admission
from ui.room.throttle import client_keys


def _client() -> list[str]:
    try:
        address = st.context.ip_address  # None on localhost and in AppTest
    except Exception:  # noqa: BLE001 -- an older Streamlit without it: the session alone is the client
        address = None
    return client_keys(current.session_id(), address)


def _seconds(wait: float) -> str:
    return f"{wait:.0f} s" if wait < 90 else f"{wait / 60:.0f} min"


def check(code: str, cfg: config.RoomConfig) -> tuple[str | None, str]:
    """(role or None, the one line to show) for a code typed into the form; wrong codes count for this client."""
    if not cfg.join_code:
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
    got = config.role_for(given, cfg)
    if got is None:
        wait = current.throttle().failed(keys)
        later = f" The next try is possible in {_seconds(wait)}." if wait > 0 else ""
        return None, "That code is not this room's. Check the projector and try again." + later
    current.throttle().succeeded(keys)
    return got, ""


def admit() -> str:
    cfg = current.settings()
    if not cfg.enabled:
        return "solo"
    role = st.session_state.get(state.ROOM_ROLE)
    if role:
        return _admitted(role)
    st.title("Two Bends — join the room")
    with st.form(key=state.ROOM_FORM):
        code = st.text_input("Room code (on the projector)", key=state.ROOM_CODE,
                             max_chars=4 * config.MAX_CODE_LEN)  # longer than any code: one clear line, below
        entered = st.form_submit_button("Join", type="primary")
    if entered:
        got, message = check(code, cfg)
        if got is None:
            st.error(message)
        else:
            st.session_state[state.ROOM_ROLE] = got
            _admitted(got)
            st.rerun()
    st.stop()


def _admitted(role: str) -> str:
    """This session is in the room as `role`: on the roster, with the rules the engine link asks before it submits
    anything (ui/room/admission.py)."""
    sid = current.session_id()
    current.room().join(sid, role)
    st.session_state[state.ROOM_RULES] = Admission(current.room(), current.slots(), sid, role)
    return role
