"""The room this server holds and this session's place in it: the one Room (with its keeper, the room's file, and
the saver of browsers' runs), Throttle and Slots per server (st.cache_resource), the room's settings, this session's
id and admitted role. Every Streamlit part of the room (gate, console, follow-me, polls) reaches them here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import state
from ui.engine_link import browser_runs
from ui.engine_link.run_store import KEPT_BYTES, KEPT_TOTAL_BYTES
from ui.room import config, signing
from ui.room.keeper import Keeper
from ui.room.opening import ENV_PROBLEM
from ui.room.registry import Room
from ui.room.saver import RunSaver
from ui.room.slots import Slots
from ui.room.throttle import Throttle


@dataclass
class Held:
    room: Room
    keeper: Keeper
    saver: RunSaver

    def close(self) -> None:
        self.saver.stop()
        self.keeper.close()


def _say_once(line: str) -> None:
    """The keeper's line for the terminal, unless the launcher already printed the same problem."""
    if not (os.environ.get(ENV_PROBLEM) and os.environ[ENV_PROBLEM] in line):
        print(line, flush=True)


@st.cache_resource(show_spinner=False, on_release=Held.close)
def held() -> Held:
    """The room, read back from its file (a restart) or made from the launcher's codes; browsers' kept runs with it."""
    cfg = settings()
    keeper = Keeper(cfg.data_dir or None, say=_say_once)
    room = Room(cfg.join_code, cfg.teacher_hash or signing.hash_code(cfg.teacher_code))
    keeper.load(room)
    saver = RunSaver(keeper, browser_runs.browsers(), KEPT_BYTES, KEPT_TOTAL_BYTES)
    saver.read_back()
    if keeper.saving:
        saver.start()
    return Held(room, keeper, saver)


def room() -> Room:
    return held().room


def keeper() -> Keeper:
    return held().keeper


def saver() -> RunSaver:
    return held().saver


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


def member_id() -> str:
    """This session's member of the room (its browser); the session id outside room mode (a solo poll's answer)."""
    member = room().member(session_id()) if settings().enabled else None
    return member.member_id if member is not None else session_id()
