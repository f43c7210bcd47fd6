"""The room's gate: in room mode no page, lab, download or engine call until the session entered a code.

`admit()` is the first thing app.py does. Outside room mode it returns "solo" (one person, one machine, everything
open). In room mode it returns "teacher" or "student" for an admitted session, and otherwise draws the join form
and stops the script. The Room (ui/room/registry.py) is one per server.
"""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.room import config
from ui.room.registry import Room


@st.cache_resource
def room() -> Room:
    return Room()


def settings() -> config.RoomConfig:
    return config.from_env()


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def role() -> str:
    """'solo' outside room mode; else this session's admitted role, or '' before the code."""
    if not settings().enabled:
        return "solo"
    return st.session_state.get(state.ROOM_ROLE, "")


def is_teacher() -> bool:
    return role() in ("solo", "teacher")


def admit() -> str:
    cfg = settings()
    if not cfg.enabled:
        return "solo"
    current = st.session_state.get(state.ROOM_ROLE)
    if current:
        room().join(session_id(), current)
        return current
    st.title("Two Bends — join the room")
    with st.form(key=state.ROOM_FORM):
        code = st.text_input("Room code (on the projector)", key=state.ROOM_CODE, max_chars=config.MAX_CODE_LEN)
        entered = st.form_submit_button("Join", type="primary")
    if entered:
        given = config.normalise(code)
        if not given:
            st.error("Type the room's code first: it is shown on the projector.")
        else:
            got = config.role_for(given, cfg)
            if got is None:
                st.error("That code is not this room's. Check the projector and try again.")
            else:
                st.session_state[state.ROOM_ROLE] = got
                room().join(session_id(), got)
                st.rerun()
    st.stop()
