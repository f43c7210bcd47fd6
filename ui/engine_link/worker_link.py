"""A session's link to the engine: which engine takes its work, the room's rules before anything is sent, its run store.

Every session's model work goes to one engine worker for the whole server (ui/engine_link/server_link.py, cached here
with st.cache_resource), which runs the scheduler (engine/serving) in its own process: the UI never runs the model, so
its drawing cannot stretch a measurement. A Run goes to the room's serving engine instead when the operator gave one
(ui/engine_link/remote_engine.py); both are EngineClients (ui/engine_link/client.py). Lab jobs, model loads and
attention captures, with the progress bars that show them, are ui/engine_link/job_progress.py. The worker's settings
come from the environment (engine/serving/scheduling/early_start.py's options_from_env; `two-bends dashboard` sets
them from its flags).
"""
from __future__ import annotations

import os

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.scheduling.work import ModelSpec, Work
from ui import state
from ui.demo import recorded
from ui.engine_link import browser_runs, client, remote_measure
from ui.engine_link.client import EngineClient
from ui.engine_link.remote_engine import RemoteEngine
from ui.engine_link.run_store import RunStore
from ui.engine_link.server_link import ServerLink


@st.cache_resource(show_spinner="Starting the engine worker (loads the model once for everyone)…")
def link() -> ServerLink:
    return ServerLink()


def service() -> EngineClient:
    """The engine worker every session shares: Runs (without a room's serving engine), lab jobs, model loads."""
    return link().service


def run_engine() -> EngineClient:
    """Where a Run goes: the room's serving engine when the operator gave one, else the engine worker; EngineError
    when the given URL is off the allow-list (every Run is refused then, never sent elsewhere)."""
    url = remote_measure.engine_url()
    return service() if url is None else RemoteEngine(url)


def remember_browser() -> None:
    """This session's store (so its browser has a token), then the cookie that keeps the token. Called in every run
    of the sidebar, so no first-run redirect loses it."""
    store()
    browser_runs.set_cookie()


def store() -> RunStore:
    """This session's RunStore: its browser's runs (found by cookie) and its own work, registered for the janitor."""
    ss = st.session_state
    if state.STORE not in ss:
        ss[state.STORE] = RunStore(runs=browser_runs.this_browser())
    ctx = get_script_run_ctx()
    if ctx is not None and not recorded.replay_only():  # replay-only mode never starts the engine worker
        lk = link()
        with lk.lock:
            lk.stores[ctx.session_id] = ss[state.STORE]
    return ss[state.STORE]


def follow(work: Work, on_event=None, poll_s: float = 0.1):
    """Read `work`'s events until its final one (ui/engine_link/client.py's follow); `on_event(event)` may draw.

    If this script run is stopped because the session closed, the work is cancelled; a plain rerun
    (a click elsewhere) leaves it running, and the next run follows it again.
    """
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    try:
        return client.follow(work, on_event, poll_s)
    except StopException:
        cancel(work)
        raise


def cancel(work: Work) -> None:
    """Cancel `work` on whichever engine took it: the worker's cancel sets the work's own flag first, which is all a
    run on the room's serving engine watches (remote_engine's child is killed when it is set)."""
    service().cancel(work)


def _room_rules():
    """In a room, the rules the gate gave this session (ui/room/admission.py: one run in flight each, the teacher's
    lab policy); None outside a room, where everything is open. The room sits above this link: it is asked, never
    imported."""
    return st.session_state.get(state.ROOM_RULES) if get_script_run_ctx() is not None else None


def submit(work: Work, engine: EngineClient | None = None) -> str | None:
    """Submit to `engine` (the engine worker by default); None when accepted, else the refusal in words (full queue,
    caps, bad settings; in a room: a second run while this session's first is in the engine, or a lab the teacher
    keeps). The room's rules are asked first, whichever engine it is."""
    rules = _room_rules()
    refused = rules.check(work) if rules is not None else None
    if refused:
        return refused
    try:
        (engine or service()).submit(work)
    except EngineError as exc:
        return str(exc)
    if rules is not None:
        rules.sent(work, store().runs)  # its browser: a room notes the run in its file until the result is saved
    return None


def submit_run(work: Work) -> str | None:
    """Submit a Run to `run_engine()`: the room's serving engine when there is one, else the worker."""
    try:
        engine = run_engine()
    except EngineError as exc:
        return str(exc)
    return submit(work, engine)


def busy() -> str | None:
    """In a room: the line to show when this session already has a run or job in the engine; else None."""
    rules = _room_rules()
    return rules.busy() if rules is not None else None


def lab_refusal() -> str | None:
    """None when this session may start lab measurements; in a room the teacher's Locks.labs decide."""
    rules = _room_rules()
    return rules.lab_refusal() if rules is not None else None


def status() -> dict:
    try:
        return service().status()
    except EngineError as exc:
        return dict(mode=os.environ.get("TWO_BENDS_MODE", "queue"), error=str(exc))


def current_spec() -> ModelSpec:
    ss = st.session_state
    name = ss.get(state.MODEL, os.environ.get("TWO_BENDS_MODEL", DEFAULT_MODEL))
    return ModelSpec(name, ss.get(state.DEVICE, "auto"), ss.get(state.DTYPE, "float32"), ss.get(state.KERNELS, "fast"))
