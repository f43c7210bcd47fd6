"""The room's server-wide state as the engine link and the room's pages both reach it: the one Room and Throttle per
server, the room's settings and this session's role. Lives below ui/room (the gate, console, follow-me) and beside
worker_link, which needs the role and the roster for its one-request-each rule and lab policy.
"""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.classroom import config
from ui.classroom.registry import Room
from ui.classroom.throttle import Throttle


@st.cache_resource
def room() -> Room:
    return Room()


@st.cache_resource
def throttle() -> Throttle:
    return Throttle()


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
