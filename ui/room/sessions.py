"""The teacher console's view of every session in the room: which are alive, what each has in flight, cancel, drop."""
from __future__ import annotations

from streamlit.runtime import Runtime

from ui.engine_link import worker_link
from ui.room import current
from ui.room.registry import Member


def sessions_alive(session_ids) -> set[str]:
    """Those of `session_ids` whose tab is open now (Streamlit's runtime); all of them outside a server."""
    if not Runtime.exists():
        return set(session_ids)
    runtime = Runtime.instance()
    return {sid for sid in session_ids if runtime.is_active_session(sid)}


def present() -> list[Member]:
    """The room's members whose tab is still open (the teacher first); members whose session is gone are dropped.
    The console's table and the poll's "answers from N students" both count from here, so a closed tab counts
    in neither."""
    room = current.room()
    room.keep_only(sessions_alive([m.session_id for m in room.snapshot()]))
    return room.snapshot()


def sessions_work() -> dict[str, list]:
    """Session id -> its work in flight: the LiveRun of its request (waiting or running) and its lab Jobs."""
    lk = worker_link.link()
    with lk.lock:
        stores = dict(lk.stores)
    out = {}
    for sid, st_store in stores.items():
        live = st_store.live
        items = ([live] if live is not None and not live.finished else []) + list(st_store.jobs.values())
        # cancelled work is on its way out: its page may be elsewhere and read the final event only when it returns
        items = [item for item in items if not getattr(item, "work", item).cancelled.is_set()]
        if items:
            out[sid] = items
    return out


def cancel_work(session_id: str, work_id: int) -> bool:
    """Cancel one request or job of a session (by the work's id); False when it is no longer there."""
    lk = worker_link.link()
    with lk.lock:
        st_store = lk.stores.get(session_id)
    if st_store is None:
        return False
    for work in st_store.in_flight():
        if work.id == work_id:
            worker_link.service().cancel(work)
            return True
    return False


def cancel_session(session_id: str) -> int:
    """Cancel everything a session has in flight; returns how many requests and jobs were cancelled."""
    lk = worker_link.link()
    with lk.lock:
        st_store = lk.stores.get(session_id)
    works = st_store.in_flight() if st_store is not None else []
    for work in works:
        worker_link.service().cancel(work)
    return len(works)


def drop_session(session_id: str) -> None:
    """Free what a session held: cancel its work, empty its store (its browser's runs too), forget it."""
    cancel_session(session_id)
    lk = worker_link.link()
    with lk.lock:
        st_store = lk.stores.pop(session_id, None)
        lk.gone_since.pop(session_id, None)
    if st_store is not None:
        st_store.clear()
