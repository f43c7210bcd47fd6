"""The dashboard's link to the engine: one worker for the whole server, one RunStore per session, runs kept per browser.

Like widgets.py this module imports streamlit (for caching and session identity); pages call it,
figures never do. Every session's model work goes to the same scheduler (engine/serving), which
runs in its own process: the UI never runs the model, so its drawing cannot stretch a measurement.
Settings come from the environment (scripts/dashboard.sh sets them from its flags):
  TWO_BENDS_MODE=queue|batch, TWO_BENDS_MAX_NUM_BATCHED_TOKENS (batch mode's chunked prefill),
  TWO_BENDS_MAX_QUEUE, TWO_BENDS_MAX_NEW_TOKENS, TWO_BENDS_MAX_BATCH, TWO_BENDS_THREADS,
  TWO_BENDS_WORKER=process|thread, TWO_BENDS_MODEL (the model loaded at start);
  TWO_BENDS_REPLAY=1: recorded runs only, the worker is never started (ui/demo/recorded.py).
A browser's runs are kept on this server under a random token in a cookie (never in the link, never shown), so
F5 or a second tab finds them; ui/engine_link/run_store.py's Browsers bounds and expires them.
The worker and every session's store, swept by a janitor, are held by ui/engine_link/server_link.py.
"""
from __future__ import annotations

import os
import queue

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling.lab_jobs import LabJob
from engine.serving.scheduling.work import FINAL, Done, Failed, Job, ModelSpec, Progress, Queued, Work
from ui import state
from ui.demo import recorded
from ui.engine_link import browser_runs
from ui.engine_link.run_store import RunStore
from ui.engine_link.server_link import GRACE_S as GRACE_S  # the janitor's grace (tests read it here)
from ui.engine_link.server_link import ServerLink as _Link
from ui.engine_link.server_link import options as options  # the worker's settings, read in one place


@st.cache_resource(show_spinner="Starting the engine worker (loads the model once for everyone)…")
def link() -> _Link:
    return _Link()


def service():
    return link().service


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
    """Read `work`'s events until its final one; `on_event(event)` after each (it may draw).

    If this script run is stopped because the session closed, the work is cancelled; a plain rerun
    (a click elsewhere) leaves it running, and the next run follows it again.
    """
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    try:
        while True:
            try:
                event = work.events.get(timeout=poll_s)
            except queue.Empty:
                event = None
            if on_event is not None:
                on_event(event)
            if isinstance(event, FINAL):
                return event
    except StopException:
        service().cancel(work)
        raise


def _room_rules():
    """In a room, the rules the gate gave this session (ui/room/admission.py: one run in flight each, the teacher's
    lab policy); None outside a room, where everything is open. The room sits above this link: it is asked, never
    imported."""
    return st.session_state.get(state.ROOM_RULES) if get_script_run_ctx() is not None else None


def submit(work: Work, send=None) -> str | None:
    """Submit; None when accepted, else the refusal in words (full queue, caps, bad settings; in a room: a second
    run while this session's first is in the engine, or a lab the teacher keeps). `send(work)` replaces the engine
    worker (the room's serving engine, ui/engine_link/remote_engine.py): the room's one-run-each rule holds there too."""
    rules = _room_rules()
    refused = rules.check(work) if rules is not None else None
    if refused:
        return refused
    try:
        (send or service().submit)(work)
    except EngineError as exc:
        return str(exc)
    if rules is not None:
        rules.sent(work, store().runs)  # its browser: a room notes the run in its file until the result is saved
    return None


def busy() -> str | None:
    """In a room: the line to show when this session already has a run or job in the engine; else None."""
    rules = _room_rules()
    return rules.busy() if rules is not None else None


def lab_refusal() -> str | None:
    """None when this session may start lab measurements; in a room the teacher's Locks.labs decide."""
    rules = _room_rules()
    return rules.lab_refusal() if rules is not None else None


def lab_notice() -> bool:
    """A lab page's first line: shows why its measurements are closed to this session; True when they are open."""
    refused = lab_refusal()
    if refused:
        st.info(refused)
    return refused is None


def model_info(spec: ModelSpec):
    """The worker's description of a model (config, tokenizer, sizes), asked once per server; raises EngineError.

    Not an st.cache_* function on purpose: it draws a progress bar while the worker loads the model, and
    elements drawn inside a cached function that raises break the page around them."""
    name = spec.name
    lk = link()
    if spec in lk.models:
        return lk.models[spec]
    job = Job(model=spec, name=jobs.MODEL_DESCRIBE.name, args=(spec,), label=f"loading {name}")
    bar = st.progress(0.0, text=f"Loading {name} in the engine worker…")
    refused = submit(job)
    if refused:
        bar.empty()
        raise EngineError(refused)

    def show(event) -> None:
        if isinstance(event, Progress) and event.fraction >= 0:
            bar.progress(min(max(event.fraction, 0.0), 1.0), text=event.message)

    final = follow(job, show)
    bar.empty()
    if isinstance(final, Failed):
        raise EngineError(final.message)
    lk.models[spec] = final.result
    return final.result


def run_job(key: str, spec: ModelSpec, lab: LabJob, args: tuple = (), kwargs: dict | None = None,
            label: str = "", on_progress=None):
    """Run the registered lab job `lab` (engine/serving/scheduling/lab_jobs.py) in the worker, keep it in this session's store
    under `key`, return its result.

    Returns None when it failed or was cancelled (a message is shown). `on_progress(event)` draws progress.
    """
    st_store = store()
    job = st_store.jobs.get(key)
    if job is None:
        job = Job(model=spec, name=lab.name, args=tuple(args), kwargs=kwargs or {}, label=label or lab.label)
        refused = submit(job)
        if refused:
            st.error(refused)
            return None
        st_store.jobs[key] = job
    final = follow(job, on_progress)
    st_store.jobs.pop(key, None)
    if isinstance(final, Done):
        return final.result
    if final.cancelled:
        st.warning("Cancelled.")
    else:
        st.error(f"The measurement failed: {final.message}")
    return None


def session_peaks(device: str, dtype: str, measure: bool = False):
    """This session's measured peaks for (device, dtype), kept in the browser's store as the Roofline lab keeps them;
    measured now in the worker (HARDWARE_PEAKS, at the sidebar model's shapes) when `measure`; else None."""
    kept = store().labs.setdefault(state.PEAKS, {})
    if (device, dtype) not in kept and measure:
        peaks = lab_run(state.PEAKS_JOB, True, jobs.HARDWARE_PEAKS, label="Measuring this machine's peaks…")
        if peaks is not None:
            kept[(peaks.device, peaks.dtype)] = peaks
    return kept.get((device, dtype))


def cancel_job(key: str) -> None:
    job = store().jobs.pop(key, None)
    if job is not None:
        service().cancel(job)


def status() -> dict:
    try:
        return service().status()
    except EngineError as exc:
        return dict(mode=os.environ.get("TWO_BENDS_MODE", "queue"), error=str(exc))


def current_spec() -> ModelSpec:
    ss = st.session_state
    name = ss.get(state.MODEL, os.environ.get("TWO_BENDS_MODEL", DEFAULT_MODEL))
    return ModelSpec(name, ss.get(state.DEVICE, "auto"), ss.get(state.DTYPE, "float32"), ss.get(state.KERNELS, "fast"))


def ensure_layer(trace, layer: int) -> bool:
    """Make sure `layer`'s attention is in the trace, capturing it in the worker if needed (untimed, one
    forward pass over the run's tokens). Keeps the captures within engine.core.capture's byte budget."""
    if trace.attention is not None and layer in trace.attention.layers:
        return True
    spec = trace.settings.get("model_spec")
    if not spec:
        st.info(f"Layer {layer} was not captured with this run, and no model is known to capture it now.")
        return False
    with st.spinner(f"Capturing layer {layer}'s attention (one untimed pass over this run's tokens)…"):
        got = run_job("attention_capture", ModelSpec(*spec), jobs.ATTENTION_CAPTURE,
                      args=(list(trace.prompt_ids), list(trace.output_ids), [layer]))
    if got is None:
        return False
    from engine.core.capture import BUDGET_BYTES  # here: it imports torch, which this process need not load at start

    merged = trace.attention.merged(got) if trace.attention is not None else got
    trace.attention = merged if merged.nbytes <= max(BUDGET_BYTES, got.nbytes) else got
    return True


# ----------------------------------------------------------------------------------------------
# Lab measurements: run in the engine worker like every other use of the model
# ----------------------------------------------------------------------------------------------
def lab_run(key: str, start: bool, lab: LabJob, args: tuple = (), kwargs: dict | None = None,
            cancel_key: str | None = None, on_payload=None, label: str = ""):
    """Start (when `start`) the registered lab job `lab` with `args` and `kwargs`, or keep following the one stored
    under `key`; its result once it ends now.

    Progress shows in a bar; a job's partial results (e.g. a sweep's points) go to `on_payload(payload)`,
    which may return (message, fraction) for the bar. A click on `cancel_key` cancels the job in the worker
    (what it measured so far stays with the caller). Returns None while nothing finished on this run.
    """
    if cancel_key and st.session_state.get(cancel_key):
        cancel_job(key)
        return None
    if not start and key not in store().jobs:
        return None
    if key not in store().jobs and lab_refusal():  # the page's lab_notice said why; the engine never sees it
        return None
    bar = st.progress(0.0, text=label or "Waiting for the engine…")

    def on_progress(event) -> None:
        if isinstance(event, Queued):
            bar.progress(0.0, text=f"Waiting for the engine: position {event.position} in the queue, "
                                   f"about {event.expected_wait_s:,.0f} s")
        elif isinstance(event, Progress):
            shown = on_payload(event.payload) if event.payload is not None and on_payload else None
            message, fraction = shown or (event.message, event.fraction)
            if fraction >= 0:
                bar.progress(min(max(fraction, 0.0), 1.0), text=message or label)

    result = run_job(key, current_spec(), lab, args, kwargs, label, on_progress)
    bar.empty()
    return result
