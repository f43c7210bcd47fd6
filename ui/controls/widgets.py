"""The Streamlit pieces every page shares: the sidebar and the live run panel (layout only).

Lives in ui/controls/, the Streamlit-bound part of ui/ (with ui/engine_link/). The model itself lives in the engine
worker (ui/engine_link/worker_link.py); here it is known by its description: config, tokenizer, sizes.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import streamlit as st

from engine.core.prompting import encode_prompt
from engine.core.sampling import SamplingParams
from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL as BUNDLED_DEFAULT
from engine.serving.scheduling.work import Request
from ui import state
from ui.controls import demo_panel, glossary_panel, presets, theme_toggle
from ui.demo import recorded
from ui.engine_link import remote_engine, worker_link
from ui.engine_link.run_store import LiveRun
from ui.figures import fig_timing
from ui.room import follow
from ui.text import prompts, run_numbers

MODEL_CHOICES = {
    BUNDLED_DEFAULT: "SmolLM2-135M-Instruct (bundled, offline)",
    "gpt2": "GPT-2 124M (downloads from Hugging Face)",
    "tiny-llama": "Tiny random Llama (instant, for testing)",
}
DEFAULT_MODEL = os.environ.get("TWO_BENDS_MODEL", BUNDLED_DEFAULT)


def current_model():
    """The sidebar's model as the engine worker describes it (config, tokenizer, sizes); None, with the
    reason shown, when it cannot be loaded."""
    spec = worker_link.current_spec()
    try:
        return worker_link.model_info(spec)
    except EngineError as exc:
        st.error(f"Could not load {spec.name} on device '{spec.device}' ({spec.dtype}): {exc}")
        return None


# ----------------------------------------------------------------------------------------------
# The shared sidebar: model, prompt (fitted to N tokens), output length, sampling, Run
# ----------------------------------------------------------------------------------------------
DEFAULT_EXAMPLE = "summarisation"
DEFAULT_PROMPT_TOKENS = 64
DEFAULT_OUTPUT_TOKENS = 32
PROMPT_TOKENS_MAX = 1024
OUTPUT_TOKENS_MAX = 512
DEFAULT_CAPTURE_LAYER = None  # when only some layers fit the capture budget: None = the middle layer


@dataclass
class RunRequest:
    """What pressing Run will send to the engine worker, or why it cannot run."""
    lm: object | None = None  # engine.serving.scheduling.model_pool.ModelInfo
    prompt: str | list[int] | None = None  # ids (exact count) or, with the chat template, the fitted text
    n_prompt: int = 0
    chat: bool = False
    max_new_tokens: int = DEFAULT_OUTPUT_TOKENS
    sampling: SamplingParams = field(default_factory=SamplingParams)
    live_chart: bool = True  # redraw the latency chart during the run (the browser's drawing costs CPU)
    quiet: bool = False  # quiet timing: nothing drawn while the model runs (chart and text drawn at the end)
    error: str | None = None


def _apply_example() -> None:
    """Picking an example fills the prompt box with its text."""
    st.session_state[state.PROMPT] = prompts.example(st.session_state[state.EXAMPLE]).text


def defaults() -> dict:
    """What a fresh session's sidebar holds (session-state key -> value); "Reset to defaults" puts them back."""
    return {state.MODEL: DEFAULT_MODEL if DEFAULT_MODEL in MODEL_CHOICES else next(iter(MODEL_CHOICES)),
            state.DEVICE: "auto", state.DTYPE: "float32", state.KERNELS: "fast",
            state.EXAMPLE: DEFAULT_EXAMPLE, state.PROMPT: prompts.example(DEFAULT_EXAMPLE).text, state.FIT_PROMPT: True,
            state.PROMPT_TOKENS: DEFAULT_PROMPT_TOKENS, state.MAX_NEW_TOKENS: DEFAULT_OUTPUT_TOKENS, state.CHAT: False,
            state.LIVE_CHART: True, state.QUIET_TIMING: False, state.TEMPERATURE: 0.0, state.TOP_K: 0, state.TOP_P: 1.0, state.SEED: 0}


def reset_to_defaults() -> None:
    """The Reset button's callback: every sidebar setting as a fresh session has it; runs and presenter mode stay."""
    st.session_state.update(defaults())


def _init_defaults() -> None:
    for key, value in defaults().items():
        st.session_state.setdefault(key, value)


def sidebar() -> RunRequest:
    """Model, prompt, lengths, sampling and the Run button, shared by all pages; returns the request."""
    _init_defaults()
    presets.apply_pending()  # a one-click preset's lengths, before the widgets that show them
    request = RunRequest()
    if recorded.replay_only():
        demo_panel.replay_sidebar()
        request.error = "this dashboard shows recorded runs only (replay mode): no model is loaded"
        return request
    with st.sidebar:
        top = st.container(horizontal=True, vertical_alignment="center", gap="small")
        glossary_panel.popover(top, "tertiary")
        theme_toggle.toggle()
        top.button("Reset to defaults", key=state.SETTINGS_RESET, on_click=reset_to_defaults, type="tertiary",
                   icon=":material/restart_alt:",
                   help="Model, prompt, lengths and sampling back to what a fresh session has. Your runs are kept.")
        locked = follow.locked_keys()  # room mode: the teacher's choices, shown but not changeable by a student
        caps = follow.length_caps()  # room mode: the teacher's maximum prompt and output lengths (None: no cap)
        prompt_max, output_max = (min(cap or high, high) for cap, high in zip(caps, (PROMPT_TOKENS_MAX, OUTPUT_TOKENS_MAX)))
        st.selectbox("Model", list(MODEL_CHOICES), format_func=MODEL_CHOICES.get, key=state.MODEL,
                     disabled=state.MODEL in locked)
        cols = st.columns(2)
        cols[0].selectbox("Device", ["auto", "cpu", "cuda", "mps"], key=state.DEVICE, disabled=state.DEVICE in locked)
        cols[1].selectbox("Dtype", ["float32", "bfloat16", "float16"], key=state.DTYPE, disabled=state.DTYPE in locked)
        st.radio("Matmul kernels", ["fast", "plain"], key=state.KERNELS, horizontal=True, disabled=state.KERNELS in locked,
                 help="fast: the library kernels measured fastest on this machine, per phase (on CPU the first "
                      "load times plain F.linear, oneDNN and MKL at this model's shapes and remembers the winner). "
                      "plain: nn.Linear, the readable teaching path. Same weights, same maths; in float32 the same tokens.")
        if locked:
            st.caption(":material/lock: Model settings are the teacher's in this room.")
        lm = current_model()
        if lm is not None:
            n = lm.config.n_params
            params = f"{n / 1e6:,.0f} M" if n >= 1e6 else f"{n / 1e3:,.0f} K"
            st.caption(f"In use: **{lm.device}** · **{lm.dtype}** · {params} parameters · "
                       f"context {lm.config.max_seq_len:,} tokens · kernels: {lm.kernels}")
            if getattr(lm, "kernel_why", ""):
                st.caption(f"Why these kernels — {lm.kernel_why}")
        request.lm = lm

        labels = {ex.key: ex.label for ex in prompts.examples()}
        st.selectbox("Example prompt", list(labels), format_func=labels.get, key=state.EXAMPLE, on_change=_apply_example)
        text = st.text_area("Prompt (edit freely)", key=state.PROMPT, height=140)
        fit = st.checkbox("Use exactly N prompt tokens (trim or repeat the text)", key=state.FIT_PROMPT,
                          help="On: the text is cut to its first N tokens, or repeated until it has N. Off: sent as typed.")
        _clamp(state.PROMPT_TOKENS, 1, prompt_max)
        st.slider("Prompt length N (tokens)", 1, prompt_max, key=state.PROMPT_TOKENS, disabled=not fit)
        _clamp(state.MAX_NEW_TOKENS, 1, output_max)
        max_new = st.slider("Output length (max new tokens)", 1, output_max, key=state.MAX_NEW_TOKENS)
        chat = st.toggle("Wrap in the model's chat template", key=state.CHAT)
        request.live_chart = st.toggle(
            "Live latency chart during generation", key=state.LIVE_CHART,
            help="Redraws the chart about once a second during a run. The browser's drawing shares this machine's "
                 "CPU with the model, so on a small machine turn it off for the cleanest timings.")
        request.quiet = st.toggle(
            "Quiet timing (draw at the end)", key=state.QUIET_TIMING,
            help="Nothing is drawn while the model runs: no live chart, no streamed text, no moving progress bar; "
                 "both are drawn when the run ends, and the model starts half a second after Run, once the page "
                 "has drawn the click. The page's own drawing then takes no CPU from the model (each run says how "
                 "long it waited for a CPU, next to TTFT and TPOT).")
        with st.expander("Sampling (temperature 0 = greedy)"):
            st.slider("Temperature", 0.0, 2.0, step=0.05, key=state.TEMPERATURE)
            st.number_input("Top-k (0 = off)", 0, 50_000, step=1, key=state.TOP_K)
            st.slider("Top-p", 0.05, 1.0, step=0.05, key=state.TOP_P)
            st.number_input("Seed", 0, 2**31 - 1, step=1, key=state.SEED)
        request.chat, request.max_new_tokens = chat, int(max_new)
        ss = st.session_state
        request.sampling = SamplingParams(temperature=float(ss[state.TEMPERATURE]), top_k=int(ss[state.TOP_K]),
                                          top_p=float(ss[state.TOP_P]), seed=int(ss[state.SEED]))
        if lm is None:
            spec = worker_link.current_spec()
            request.error = (f"{spec.name} could not be loaded on device '{spec.device}' ({spec.dtype}): "
                             "pick another device, dtype or model above.")
        else:
            _fit_prompt(request, text, ss[state.PROMPT_TOKENS] if fit else None)
            if caps[0] is not None and not request.error and request.n_prompt > prompt_max:
                request.error = (f"the prompt has {request.n_prompt} tokens; the teacher's limit in this room is "
                                 f"{prompt_max}: shorten it or turn on 'Use exactly N prompt tokens'.")
                st.warning(request.error)
        st.button("Run", key=state.RUN, type="primary", width="stretch")
        _server_line()
        demo_panel.sidebar_section()
    return request


def _server_line() -> None:
    """The scheduling mode the operator chose, and how busy the shared engine is."""
    info = worker_link.status()
    mode = info.get("mode", "queue")
    what = ("**queue**: one request at a time, first come first served" if mode == "queue"
            else "**batch**: continuous batching, requests share decode steps")
    busy = (f" · {info['running']} running, {info['waiting']} waiting" if "running" in info
            else f" · {info.get('error', '')}")
    threads = worker_link.options().threads
    cores = f" · the model on {threads} thread{'s' if threads > 1 else ''}" if threads else ""
    st.caption(f"Engine worker: {what}{busy}{cores}.")


def _clamp(key: str, low: int, high: int) -> None:
    if key in st.session_state:
        st.session_state[key] = int(min(max(st.session_state[key], low), high))


def _fit_prompt(request: RunRequest, text: str, n_tokens: int | None) -> None:
    """Fit the prompt to N tokens, show the exact count (and text) sent, or note why it cannot be sent."""
    lm = request.lm
    try:
        fitted = prompts.fit_prompt_to_tokens(lm.tokenizer, text, n_tokens)
    except ValueError as exc:
        request.error = f"{str(exc).capitalize()}."
        st.warning(request.error)
        return
    request.prompt, request.n_prompt = fitted.ids, len(fitted.ids)
    line = prompts.describe_fit(fitted)
    if request.chat:
        try:
            request.prompt = encode_prompt(lm, fitted.text, chat=True)
            request.n_prompt = len(request.prompt)
            line += f" + chat template = **{request.n_prompt} tokens** in all"
        except EngineError as exc:
            request.error = str(exc)
    st.markdown(line)
    with st.expander("Show the exact prompt sent"):
        st.text(fitted.text)
    if request.error:
        st.warning(request.error)


# ----------------------------------------------------------------------------------------------
# The run panel: sends the request to the engine worker and follows it live, above whatever page is open
# ----------------------------------------------------------------------------------------------
LIVE_TEXT_EVERY_S = 0.5  # refresh the streamed text and progress bar at most this often
LIVE_CHART_EVERY_S = 2.0  # redraw the live chart at most this often: the browser draws on the same CPU
# (measured: scripts/ui_vs_cli.py; the Timing page states what remains)
# While a run is live, no CSS animations or transitions (spinners, fades of the page's older elements): drawing
# them took the browser a core the engine worker needed (measured: README, "Serving a room"). The progress bar
# and the streamed text still move.
# quiet timing draws the run panel, waits this long, then sends the request: in headless Chromium the Run click's
# redraw took the cores during prefill (scripts/disturbance.py: 45-65 ms of a 124-178 ms TTFT spent waiting for a
# CPU; the CLI's TTFT 55-77 ms)
QUIET_SETTLE_S = 0.5
QUIET_TEXT = "Timing quietly: nothing is drawn until the run ends (Quiet timing, in the sidebar)"
STILL_WHILE_RUNNING = "<style>*, *::before, *::after { animation: none !important; transition: none !important; }</style>"


def run_panel(request: RunRequest) -> None:
    """Run pressed: submit the request; while one is in flight (also after a page switch): follow it live.

    Only a complete trace is stored, so a cancelled or failed run leaves the previous results untouched.
    """
    store = worker_link.store()
    ss = st.session_state
    if ss.get(state.RUN_CANCEL) and store.live is not None:
        worker_link.service().cancel(store.live.work)
    pressed, start_later = _run_pressed(), None
    busy = worker_link.busy() if pressed else None  # a room: the run in flight keeps its place, no second one
    if busy:
        st.warning(busy)
    elif pressed:
        if request.error or request.lm is None:
            st.error(f"Cannot run: {request.error}")
            return
        if store.live is not None and not store.live.finished:
            worker_link.service().cancel(store.live.work)
        work = Request(model=worker_link.current_spec(), prompt_ids=list(request.prompt), max_new_tokens=request.max_new_tokens,
                       params=request.sampling, prompt_text=request.lm.tokenizer.decode(request.prompt),
                       chat=request.chat, capture_attention=True, capture_layer=DEFAULT_CAPTURE_LAYER)

        def start() -> str | None:
            return remote_engine.route(work, worker_link.submit)  # the room's server, if any

        if request.quiet:  # quiet timing: sent once the run panel is drawn and the browser is done drawing
            start_later = start
        elif refused := start():
            st.error(f"Cannot run: {refused}")
            return
        store.live = LiveRun(work, len(request.prompt), request.max_new_tokens)
    live = store.live
    if live is None:
        return
    if not _follow_live(live, request.live_chart, request.quiet, start_later):
        store.live = None  # refused: nothing was sent
        return
    if live.trace is not None:
        spec = live.work.model
        if live.trace.source != "server":  # a server's run: local_replay.local_replay, on demand
            live.trace.settings["model_spec"] = [spec.name, spec.device, spec.dtype, spec.kernels]  # to capture more layers later
            live.trace.settings["quiet_timing"] = request.quiet
        store.keep(live.trace)
    store.live = None


def _run_pressed() -> bool:
    """Run in the sidebar or in presenter mode's bar, a preset's click (once), or a link's run=1 not yet started
    (once per opening)."""
    ss = st.session_state
    pressed = bool(ss.get(state.RUN) or ss.get(state.PRESENTER_RUN) or ss.pop(state.RUN_REQUESTED, False))
    if ss.get(state.LINK_RUN) == demo_panel.LINK_PENDING:
        ss[state.LINK_RUN] = demo_panel.LINK_DONE
        pressed = True
    return pressed


def _follow_live(live: LiveRun, live_chart: bool, quiet: bool = False, start=None) -> bool:
    """Draw the run panel, then (quiet timing) let the browser draw it and `start()` the run; follow it to its end.
    False when `start` was refused."""
    head = f"{live.n_prompt} prompt tokens → up to {live.max_new_tokens} new tokens"
    with st.container(key=state.RUN_PANEL), st.status(f"Running: {head}…", expanded=True) as status:
        st.html(STILL_WHILE_RUNNING)
        cancel_box = st.empty()  # emptied when the run failed: nothing left to cancel
        cancel_box.button("■ Cancel this run", key=state.RUN_CANCEL)
        bar = st.progress(0.0, text="Waiting for the engine…")
        text_box, chart_box = st.empty(), st.empty()
        clock = dict(text=0.0, chart=time.perf_counter(), draws=0, quiet_shown=False)
        if start is not None:
            bar.progress(0.0, text=QUIET_TEXT)
            clock["quiet_shown"] = True
            time.sleep(QUIET_SETTLE_S)  # outside every timing: the request is not sent yet
            if refused := start():
                cancel_box.empty(), bar.empty()
                status.update(label="Cannot run", state="error", expanded=True)
                st.error(f"Cannot run: {refused}")
                return False

        def show(event) -> None:
            live.apply(event) if event is not None else None
            now = time.perf_counter()
            if quiet and not live.finished:  # quiet timing: one line now, everything else once the run is over
                if not clock["quiet_shown"]:
                    bar.progress(0.0, text=QUIET_TEXT)
                    clock["quiet_shown"] = True
                return
            if now - clock["text"] >= LIVE_TEXT_EVERY_S or live.finished:
                bar.progress(min(live.n_output / live.max_new_tokens, 1.0), text=_progress_text(live))
                text_box.text("".join(live.pieces))
                clock["text"] = now
            if live.steps and ((live_chart and now - clock["chart"] >= LIVE_CHART_EVERY_S) or (quiet and live.finished)):
                clock["draws"] += 1
                fig = fig_timing.itl_figure(live.prefill_seconds or 0.0, [s.seconds for s in live.steps],
                                            title="Live: each token's latency", height=300)
                chart_box.plotly_chart(theme_toggle.styled(fig), width="stretch", key=f"live_itl_{clock['draws']}", theme=None)
                clock["chart"] = time.perf_counter()

        while not live.finished:  # events already received on an earlier script run are in `live`
            worker_link.follow(live.work, show)
        if live.trace is not None and live.trace.source == "server":
            trace = live.trace
            status.update(label=f"Run finished on {trace.settings.get('url')}: TTFT {trace.prefill_seconds * 1000:,.0f}"
                                " ms from outside (queue, network and HTTP included)", state="complete", expanded=False)
        elif live.trace is not None:
            trace = live.trace
            status.update(label=f"Run finished: {trace.n_prompt} → {trace.n_output} tokens, TTFT "
                                f"{trace.prefill_seconds * 1000:,.0f} ms, total {trace.total_seconds:,.2f} s"
                                f"{run_numbers.cpu_wait_label(trace)} "
                                f"(queue {trace.queue_seconds:.2f} s, warm-up {trace.warmup_seconds:.2f} s and attention "
                                f"capture {trace.capture_seconds:.2f} s not counted)", state="complete", expanded=False)
        elif live.cancelled:
            status.update(label="Run cancelled; the previous results stay.", state="error", expanded=False)
        else:
            cancel_box.empty(), bar.empty()  # no stale "Prefill: reading…" under a failure
            status.update(label="The run did not complete", state="error", expanded=True)
            st.error(f"Cannot run: {live.failure}")
    return True


def _progress_text(live: LiveRun) -> str:
    if live.position is not None:
        return (f"Waiting in the queue: position {live.position}, about {live.expected_wait_s:,.0f} s "
                "(other students' requests run first)")
    if live.prefill_seconds is None:
        return "Prefill: reading the whole prompt in one pass (the valley)…"
    if live.message:
        return live.message
    return f"Decode: token {live.n_output} of up to {live.max_new_tokens} (the bridge, one at a time)"

