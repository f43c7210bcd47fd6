"""The teacher console's view of every session in the room: which tabs are open, what each has in the engine, cancel,
drop. What is waiting or running comes from one place, the room's slots (ui/room/slots.py: every session's work in
flight, the teacher's too, with the engine's own Started and final events), so the console's counts and its table
never disagree with each other.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from streamlit.runtime import Runtime

from ui.engine_link import worker_link
from ui.room import current
from ui.room.registry import Member
from ui.room.slots import describe, is_lab


@dataclass
class InFlight:
    session_id: str
    work: object  # the Request or Job
    state: str  # "waiting", "running" or "lab"
    what: str  # in words ("64 → 32 tokens", "prompt-length sweep")
    wait: str  # its queue wait so far, or before it started


def sessions_alive(session_ids) -> set[str]:
    """Those of `session_ids` whose tab is open now (Streamlit's runtime); all of them outside a server."""
    if not Runtime.exists():
        return set(session_ids)
    runtime = Runtime.instance()
    return {sid for sid in session_ids if runtime.is_active_session(sid)}


def present() -> list[Member]:
    """The room's members with a tab open now (the teacher first); closed tabs are forgotten (their members stay,
    away) and their slots freed. The console's table and the poll's "answers from N students" both count from
    here, so a closed tab counts in neither."""
    room = current.room()
    for sid in room.keep_only(sessions_alive(list(room.by_session))):
        current.slots().release(sid)
    return room.present()


def in_the_engine(now: float | None = None) -> dict[str, InFlight]:
    """Session id -> the work it has in the engine (waiting, running, or a lab job), from the room's slots."""
    now = time.perf_counter() if now is None else now
    out = {}
    for sid, work in current.slots().busy().items():
        started = getattr(work.events, "started", None)
        if is_lab(work):
            state = "lab"
        else:
            state = "waiting" if started is None else "running"
        wait = (f"{now - work.arrival:,.1f} s so far" if started is None else f"{started.queue_seconds:,.1f} s")
        out[sid] = InFlight(sid, work, state, describe(work), wait)
    return out


def cancel(session_id: str, work_id: int) -> bool:
    """Cancel one session's work in the engine (by the work's id); False when it is no longer there."""
    work = current.slots().busy().get(session_id)
    if work is None or work.id != work_id:
        return False
    worker_link.service().cancel(work)
    return True


def cancel_session(session_id: str) -> int:
    """Cancel everything a session has in flight (its slot's work and what its store follows); how many."""
    lk = worker_link.link()
    with lk.lock:
        st_store = lk.stores.get(session_id)
    works = [w for w in (st_store.in_flight() if st_store is not None else []) if not w.cancelled.is_set()]
    held = current.slots().busy().get(session_id)
    if held is not None and held not in works:
        works.append(held)
    for work in works:
        worker_link.service().cancel(work)
    return len(works)


def drop_session(session_id: str) -> None:
    """Free what a session held: cancel its work, empty its store (its browser's runs too), forget it."""
    cancel_session(session_id)
    current.slots().release(session_id)
    lk = worker_link.link()
    with lk.lock:
        st_store = lk.stores.pop(session_id, None)
        lk.gone_since.pop(session_id, None)
    if st_store is not None:
        st_store.clear()


def teachers_browsers() -> set[str]:
    """The browser tokens of the teacher's open tabs (their runs stay when the room is cleared)."""
    room = current.room()
    teacher_sessions = {sid for m in room.present() if m.role == "teacher" for sid in m.sessions}
    lk = worker_link.link()
    with lk.lock:
        return {store.runs.token for sid, store in lk.stores.items() if sid in teacher_sessions and store.runs.token}
