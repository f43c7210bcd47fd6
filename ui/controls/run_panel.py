"""The live run panel: Run sends the request to the engine worker and follows it live, above whatever page is open.

Only a complete trace is kept (ui/engine_link/run_store.py), so a cancelled or failed run leaves the previous results
as they were; while a run is live the page keeps still (no CSS animations), and quiet timing draws nothing until the
run ends, so the browser does not take the cores the engine needs. The sidebar that fills the RunRequest is
ui/controls/widgets.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import streamlit as st

from engine.core.sampling_params import SamplingParams
from engine.host.proc_stat import wait_for_quiet
from engine.serving.scheduling.work import Request
from ui import state
from ui.controls import demo_panel, theme_toggle
from ui.engine_link import job_progress, worker_link
from ui.engine_link.run_store import LiveRun
from ui.figures import fig_timing
from ui.text import run_numbers

DEFAULT_OUTPUT_TOKENS = 32  # the sidebar's default output length (ui/controls/widgets.py)


@dataclass
class RunRequest:
    """What pressing Run will send to the engine worker, or why it cannot run."""
    lm: object | None = None  # engine.serving.scheduling.work.ModelInfo
    prompt: str | list[int] | None = None  # ids (exact count) or, with the chat template, the fitted text
    n_prompt: int = 0
    chat: bool = False
    max_new_tokens: int = DEFAULT_OUTPUT_TOKENS
    sampling: SamplingParams = field(default_factory=SamplingParams)
    live_chart: bool = True  # redraw the latency chart during the run (the browser's drawing costs CPU)
    quiet: bool = False  # quiet timing: nothing drawn while the model runs (chart and text drawn at the end)
    error: str | None = None


# A live run draws little: the browser draws on the cores the engine is timed on. Each number below was measured page
# vs CLI (benchmarks/disturbance.py); the measurements: docs/decisions/page-disturbance.md.
LIVE_TEXT_EVERY_S = 1.0  # refresh the streamed text and progress bar at most this often
LIVE_CHART_EVERY_S = 2.0  # redraw the live chart at most this often
LIVE_CHART_MIN_LEFT_S = 1.0  # and not in a run's last second: the finished run's charts replace it at once
# While a run is live, no CSS animations or transitions (spinners, fades); the progress bar and the text still move.
# every run draws its panel, waits SETTLE_S, then sends the request: the Run click's redraw is over; a run started by a
# link's run=1 waits for quiet cores (engine/host/proc_stat.py), at most LINK_SETTLE_MOST_S after its panel: the browser
# is still loading the whole app then. The same two figures as a lab's measurement (ui/engine_link/job_progress.py)
SETTLE_S, LINK_SETTLE_MOST_S = job_progress.QUIET_FIRST_S, job_progress.QUIET_MOST_S
LINK_SETTLE_TEXT = ("Starting: the browser is still loading this page; the run waits until the cores are quiet (at most "
                    f"{LINK_SETTLE_MOST_S:.0f} s), so that loading does not take them from prefill")
QUIET_TEXT = "Timing quietly: nothing is drawn until the run ends (Quiet timing, in the sidebar)"
SETTLE_TEXT = "Starting: the page draws first, so its drawing does not take the cores from prefill"
NOT_SENT = "The last run was not sent: the page changed before it started. Press Run again."
STILL_WHILE_RUNNING = "<style>*, *::before, *::after { animation: none !important; transition: none !important; }</style>"


def run_panel(request: RunRequest) -> None:
    """Run pressed: submit the request; while one is in flight (also after a page switch): follow it live."""
    store = worker_link.store()
    ss = st.session_state
    if ss.get(state.RUN_CANCEL) and store.live is not None:
        worker_link.cancel(store.live.work)
    (pressed, by_link), start_later = _run_pressed(), None
    busy = worker_link.busy() if pressed else None  # a room: the run in flight keeps its place, no second one
    if busy:
        st.warning(busy)
    elif pressed:
        if request.error or request.lm is None:
            st.error(f"Cannot run: {request.error}")
            return
        if store.live is not None and not store.live.finished:
            worker_link.cancel(store.live.work)
        work = Request(model=worker_link.current_spec(), prompt_ids=list(request.prompt), max_new_tokens=request.max_new_tokens,
                       params=request.sampling, prompt_text=request.lm.tokenizer.decode(request.prompt),
                       chat=request.chat, capture_attention=True)

        def start() -> str | None:
            work.arrival = time.perf_counter()  # it reaches the engine now: the half second before is not queueing
            return worker_link.submit_run(work)  # the room's serving engine, if any

        start_later = start  # sent once the run panel is drawn and the browser is done drawing it
        store.live = LiveRun(work, len(request.prompt), request.max_new_tokens)
    live = store.live
    if live is None:
        return
    if not live.sent and start_later is None:  # a click stopped the script run that was to send it: never sent,
        store.live = None  # so never followed (it would wait for events forever)
        st.info(NOT_SENT)
        return
    if not _follow_live(live, request.live_chart, request.quiet, start_later,
                        settle_most=LINK_SETTLE_MOST_S if by_link else SETTLE_S):
        store.live = None  # refused: nothing was sent
        return
    if live.trace is not None:
        spec = live.work.model
        if live.trace.source != "server":  # a server's run: local_replay.local_replay, on demand
            live.trace.settings["model_spec"] = [spec.name, spec.device, spec.dtype, spec.kernels]  # to capture more layers later
            live.trace.settings["quiet_timing"] = request.quiet
            live.trace.settings["sent_after_s"] = round(live.sent_after_s, 3)  # panel drawn -> request sent (untimed)
        store.keep(live.trace)
    store.live = None


def _run_pressed() -> tuple[bool, bool]:
    """(pressed, by a link): Run in the sidebar or in presenter mode's bar, a preset's click (once), or a link's run=1
    not yet started (once per opening)."""
    ss = st.session_state
    pressed = bool(ss.get(state.RUN) or ss.get(state.PRESENTER_RUN) or ss.pop(state.RUN_REQUESTED, False))
    if ss.get(state.LINK_RUN) == demo_panel.LINK_PENDING:
        ss[state.LINK_RUN] = demo_panel.LINK_DONE
        return True, not pressed
    return pressed, False


def _follow_live(live: LiveRun, live_chart: bool, quiet: bool = False, start=None, settle_most: float = SETTLE_S) -> bool:
    """Draw the run panel, let the browser draw it (SETTLE_S; up to `settle_most` while the cores stay busy) and
    `start()` the run; follow it to its end. False when `start` was refused."""
    head = f"{live.n_prompt} prompt tokens → up to {live.max_new_tokens} new tokens"
    with st.container(key=state.RUN_PANEL), st.status(f"Running: {head}…", expanded=True) as status:
        st.html(STILL_WHILE_RUNNING)
        cancel_box = st.empty()  # emptied when the run failed: nothing left to cancel
        cancel_box.button("■ Cancel this run", key=state.RUN_CANCEL)
        sent = {"bar": (0.0, "Waiting for the engine…"), "text": ""}  # what the browser shows: only changes are sent
        bar = st.progress(*sent["bar"])
        text_box, chart_box = st.empty(), st.empty()
        clock = dict(text=0.0, chart=time.perf_counter(), draws=0)

        def set_bar(value: float, text: str) -> None:
            if _changed(sent, "bar", (value, text)):
                bar.progress(value, text=text)

        if start is not None:
            set_bar(0.0, QUIET_TEXT if quiet else SETTLE_TEXT if settle_most <= SETTLE_S else LINK_SETTLE_TEXT)
            if settle_most <= SETTLE_S:  # outside every timing: the request is not sent yet
                time.sleep(SETTLE_S)
                live.sent_after_s = SETTLE_S
            else:
                live.sent_after_s = wait_for_quiet(SETTLE_S, settle_most)[0]
            if refused := start():
                cancel_box.empty(), bar.empty()
                status.update(label="Cannot run", state="error", expanded=True)
                st.error(f"Cannot run: {refused}")
                return False
            live.sent = True

        def show(event) -> None:
            live.apply(event) if event is not None else None
            now = time.perf_counter()
            if quiet and not live.finished:  # quiet timing: one line now, everything else once the run is over
                set_bar(0.0, QUIET_TEXT)
                return
            if now - clock["text"] >= LIVE_TEXT_EVERY_S or live.finished:  # only what changed: a page waiting in the
                set_bar(min(live.n_output / live.max_new_tokens, 1.0), _progress_text(live))  # queue sends its moves
                if _changed(sent, "text", "".join(live.pieces)):
                    text_box.text(sent["text"])
                clock["text"] = now
            if live.steps and ((live_chart and chart_due(live, now - clock["chart"])) or (quiet and live.finished)):
                clock["draws"] += 1
                fig = fig_timing.itl_figure(live.prefill_seconds or 0.0, [s.seconds for s in live.steps],
                                            title="Live: each token's latency", height=300)
                chart_box.plotly_chart(theme_toggle.styled(fig), width="stretch", key=f"live_itl_{clock['draws']}", theme=None)
                clock["chart"] = time.perf_counter()

        while not live.finished:  # events already received on an earlier script run are in `live`
            worker_link.follow(live.work, show)
        trace = live.trace
        if trace is not None and trace.source == "server":
            status.update(label=f"Run finished on {trace.settings.get('url')}: TTFT {trace.prefill_seconds * 1000:,.0f}"
                                " ms from outside (queue, network and HTTP included)", state="complete", expanded=False)
        elif trace is not None:
            status.update(label=run_numbers.finished_label(trace), state="complete", expanded=False)
        elif live.cancelled:
            status.update(label="Run cancelled; the previous results stay.", state="error", expanded=False)
        else:
            cancel_box.empty(), bar.empty()  # no stale "Prefill: reading…" under a failure
            status.update(label="The run did not complete", state="error", expanded=True)
            st.error(f"Cannot run: {live.failure}")
    return True


def _changed(sent: dict, key: str, value) -> bool:
    """True, and `value` remembered, when it differs from what was last sent to the browser under `key` (each element
    sent again redraws a waiting student's page twice a second, on the server and in the browser, for nothing)."""
    if sent.get(key) == value:
        return False
    sent[key] = value
    return True


def chart_due(live: LiveRun, since_drawn_s: float) -> bool:
    """Redraw the live chart now? At most every LIVE_CHART_EVERY_S, and not once less than LIVE_CHART_MIN_LEFT_S of
    the run is left (nor after it ended)."""
    return (since_drawn_s >= LIVE_CHART_EVERY_S and not live.finished
            and live.seconds_left() >= LIVE_CHART_MIN_LEFT_S)


def _progress_text(live: LiveRun) -> str:
    if live.position is not None:
        return (f"Waiting in the queue: position {live.position}, about {live.expected_wait_s:,.0f} s "
                "(an estimate from recent runs; other students' requests run first)")
    if live.prefill_seconds is None:
        return "Prefill: reading the whole prompt in one pass (the valley)…"
    if live.message:
        return live.message
    return f"Decode: token {live.n_output} of up to {live.max_new_tokens} (the bridge, one at a time)"

