"""The room this server holds and this session's place in it: the one Room, Throttle and Slots per server
(st.cache_resource), the room's settings, this session's id and admitted role. Every Streamlit part of the room
(gate, console, follow-me, polls) reaches them here.
"""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.room import config
from ui.room.registry import Room
from ui.room.slots import Slots
from ui.room.throttle import Throttle


@st.cache_resource
def room() -> Room:
    return Room()


@st.cache_resource
def throttle() -> Throttle:
    return Throttle()


@st.cache_resource
def slots() -> Slots:
    """Which session holds which work in the engine: one run in flight each (ui/room/slots.py)."""
    return Slots()


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
