"""Jobs in the engine worker, drawn while they run: a lab's measurement, a model's load, an attention capture.

Each sends a Job (engine/serving/scheduling/work.py) through the session's link (ui/engine_link/worker_link.py) and
draws its progress bar, spinner or refusal here. A lab job is named by its key in the one registry,
engine/serving/scheduling/lab_jobs.py ("sweeps.prompt_lengths"): a page names it without importing the engine, an
unknown name is refused with the known ones, and tests/pages/test_imports.py checks every name a page uses.
"""
from __future__ import annotations

import streamlit as st

from engine.errors import EngineError
from engine.host.proc_stat import wait_for_quiet
from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.lab_jobs import LabJob
from engine.serving.scheduling.work import Done, Failed, Job, ModelSpec, Progress, Queued
from ui import state
from ui.engine_link import worker_link

# A lab measurement is sent once the cores are quiet, from QUIET_FIRST_S on and at most QUIET_MOST_S: the browser is
# drawing the page that asked for it on the same cores (a link's run waits the same way, ui/controls/run_panel.py;
# what it bought: docs/decisions/page-disturbance.md)
QUIET_FIRST_S, QUIET_MOST_S = 0.5, 3.0
QUIET_TEXT = f"Starting: the measurement waits until the cores are quiet (at most {QUIET_MOST_S:.0f} s): the page draws first"


def model_info(spec: ModelSpec):
    """The worker's description of a model (config, tokenizer, sizes), asked once per server; raises EngineError.

    Not an st.cache_* function on purpose: it draws a progress bar while the worker loads the model, and
    elements drawn inside a cached function that raises break the page around them."""
    name = spec.name
    lk = worker_link.link()
    if spec in lk.models:
        return lk.models[spec]
    job = Job(model=spec, name=lab_jobs.MODEL_DESCRIBE.name, args=(spec,), label=f"loading {name}")
    bar = st.progress(0.0, text=f"Loading {name} in the engine worker…")
    refused = worker_link.submit(job)
    if refused:
        bar.empty()
        raise EngineError(refused)

    def show(event) -> None:
        if isinstance(event, Progress) and event.fraction >= 0:
            bar.progress(min(max(event.fraction, 0.0), 1.0), text=event.message)

    final = worker_link.follow(job, show)
    bar.empty()
    if isinstance(final, Failed):
        raise EngineError(final.message)
    lk.models[spec] = final.result
    return final.result


def run_job(key: str, spec: ModelSpec, lab: LabJob | str, args: tuple = (), kwargs: dict | None = None,
            label: str = "", on_progress=None):
    """Run the registered lab job `lab` (or its name) in the worker, keep it in this session's store under `key`,
    return its result.

    Returns None when it failed or was cancelled (a message is shown). `on_progress(event)` draws progress.
    """
    st_store = worker_link.store()
    job = st_store.jobs.get(key)
    if job is None:
        try:
            lab = lab_jobs.lookup(lab) if isinstance(lab, str) else lab
        except EngineError as exc:
            st.error(str(exc))
            return None
        job = Job(model=spec, name=lab.name, args=tuple(args), kwargs=kwargs or {}, label=label or lab.label)
        refused = worker_link.submit(job)
        if refused:
            st.error(refused)
            return None
        st_store.jobs[key] = job
    final = worker_link.follow(job, on_progress)
    st_store.jobs.pop(key, None)
    if isinstance(final, Done):
        return final.result
    if final.cancelled:
        st.warning("Cancelled.")
    else:
        st.error(f"The measurement failed: {final.message}")
    return None


def lab_notice() -> bool:
    """A lab page's first line: shows why its measurements are closed to this session; True when they are open."""
    refused = worker_link.lab_refusal()
    if refused:
        st.info(refused)
    return refused is None


def lab_run(key: str, start: bool, lab: LabJob | str, args: tuple = (), kwargs: dict | None = None,
            cancel_key: str | None = None, on_payload=None, label: str = ""):
    """Start (when `start`) the registered lab job `lab` (or its registry name) with `args` and `kwargs`, or keep
    following the one stored under `key`; its result once it ends now.

    Progress shows in a bar; a job's partial results (e.g. a sweep's points) go to `on_payload(payload)`,
    which may return (message, fraction) for the bar. A click on `cancel_key` cancels the job in the worker
    (what it measured so far stays with the caller). Returns None while nothing finished on this run.
    """
    jobs = worker_link.store().jobs
    if cancel_key and st.session_state.get(cancel_key):
        if (job := jobs.pop(key, None)) is not None:
            worker_link.cancel(job)
        return None
    starting = key not in jobs
    if starting and (not start or worker_link.lab_refusal()):  # refused: the page's lab_notice said why; the engine never sees it
        return None
    waiting = label or "Waiting for the engine…"
    bar = st.progress(0.0, text=QUIET_TEXT if starting else waiting)
    if starting:
        wait_for_quiet(QUIET_FIRST_S, QUIET_MOST_S)
        bar.progress(0.0, text=waiting)

    def on_progress(event) -> None:
        if isinstance(event, Queued):
            bar.progress(0.0, text=f"Waiting for the engine: position {event.position} in the queue, "
                                   f"about {event.expected_wait_s:,.0f} s (an estimate from recent runs)")
        elif isinstance(event, Progress):
            shown = on_payload(event.payload) if event.payload is not None and on_payload else None
            message, fraction = shown or (event.message, event.fraction)
            if fraction >= 0:
                bar.progress(min(max(fraction, 0.0), 1.0), text=message or label)

    result = run_job(key, worker_link.current_spec(), lab, args, kwargs, label, on_progress)
    bar.empty()
    return result


def session_peaks(device: str, dtype: str, why: str):
    """This session's measured peaks for (device, dtype), kept in the browser's store as the Roofline lab keeps them.
    None kept: says `why` (what the page needs them for) and offers a button that measures them now in the worker (HARDWARE_PEAKS,
    at the sidebar model's shapes); None until measured."""
    kept = worker_link.store().labs.setdefault(state.PEAKS, {})
    if (device, dtype) not in kept:
        st.caption(why)
        if st.button("Measure this machine's peaks", key=state.STORY_PEAKS_MEASURE,
                     disabled=worker_link.lab_refusal() is not None, help=worker_link.lab_refusal()):
            peaks = lab_run(state.PEAKS_JOB, True, lab_jobs.HARDWARE_PEAKS, label="Measuring this machine's peaks…")
            if peaks is not None:
                kept[(peaks.device, peaks.dtype)] = peaks
    return kept.get((device, dtype))


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
        got = run_job("attention_capture", ModelSpec(*spec), lab_jobs.ATTENTION_CAPTURE,
                      args=(list(trace.prompt_ids), list(trace.output_ids), [layer]))
    if got is None:
        return False
    from engine.core.capture import BUDGET_BYTES  # here: it imports torch, which this process need not load at start

    merged = trace.attention.merged(got) if trace.attention is not None else got
    trace.attention = merged if merged.nbytes <= max(BUDGET_BYTES, got.nbytes) else got
    return True
