"""The Streamlit pieces every page shares: the cached model, the sidebar and the live run panel (layout only).

This is the only module in ui/ that imports streamlit.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

import streamlit as st

import engine
import engine.core.prompting
from ui import fig_timing, prompts, state

MODEL_CHOICES = {
    "smollm2-135m": "SmolLM2-135M-Instruct (bundled, offline)",
    "gpt2": "GPT-2 124M (downloads from Hugging Face)",
    "tiny-llama": "Tiny random Llama (instant, for testing)",
}
DEFAULT_MODEL = os.environ.get("TWO_BENDS_MODEL", "smollm2-135m")


@st.cache_resource(show_spinner=False, max_entries=3)
def _load(name: str, device: str, dtype: str) -> engine.LoadedModel:
    bar = st.progress(0.0, text=f"Loading {name}…")

    def progress(message: str, fraction: float) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=message)

    lm = engine.load_model(name, device=device, dtype=dtype, progress=progress)
    bar.empty()
    return lm


def model_in_dtype(dtype: str) -> engine.LoadedModel:
    """The sidebar's model and device in another dtype (cached like the main one); raises EngineError."""
    name = st.session_state.get(state.MODEL, DEFAULT_MODEL)
    return _load(name, st.session_state.get(state.DEVICE, "auto"), dtype)


def current_model() -> engine.LoadedModel | None:
    """The model chosen in the sidebar, loaded once per server; None (with a message shown) on error."""
    try:
        return model_in_dtype(st.session_state.get(state.DTYPE, "float32"))
    except engine.EngineError as exc:
        st.error(f"Could not load the model: {exc}")
        return None


# ----------------------------------------------------------------------------------------------
# The shared sidebar: model, prompt (fitted to N tokens), output length, sampling, Run
# ----------------------------------------------------------------------------------------------
DEFAULT_EXAMPLE = "summarisation"
DEFAULT_PROMPT_TOKENS = 64
DEFAULT_OUTPUT_TOKENS = 32
PROMPT_TOKENS_MAX = 1024
OUTPUT_TOKENS_MAX = 512
FULL_CAPTURE_MAX_TOKENS = 384  # longer prompts: capture attention in a few layers only (memory: H x T x T each)
CAPTURED_LAYERS_LONG = 8


@dataclass
class RunRequest:
    """What pressing Run will send to engine.generate, or why it cannot run."""
    lm: engine.LoadedModel | None = None
    prompt: str | list[int] | None = None  # ids (exact count) or, with the chat template, the fitted text
    n_prompt: int = 0
    chat: bool = False
    max_new_tokens: int = DEFAULT_OUTPUT_TOKENS
    sampling: dict = field(default_factory=dict)
    live_chart: bool = True  # redraw the latency chart during the run (the browser's drawing costs CPU)
    error: str | None = None


def _apply_example() -> None:
    """Picking an example fills the prompt box with its text."""
    st.session_state[state.PROMPT] = prompts.example(st.session_state[state.EXAMPLE]).text


def _init_defaults() -> None:
    ss = st.session_state
    ss.setdefault(state.EXAMPLE, DEFAULT_EXAMPLE)
    ss.setdefault(state.PROMPT, prompts.example(DEFAULT_EXAMPLE).text)
    ss.setdefault(state.FIT_PROMPT, True)
    ss.setdefault(state.PROMPT_TOKENS, DEFAULT_PROMPT_TOKENS)
    ss.setdefault(state.MAX_NEW_TOKENS, DEFAULT_OUTPUT_TOKENS)
    ss.setdefault(state.CHAT, False)
    ss.setdefault(state.LIVE_CHART, True)
    ss.setdefault(state.TEMPERATURE, 0.0)
    ss.setdefault(state.TOP_K, 0)
    ss.setdefault(state.TOP_P, 1.0)
    ss.setdefault(state.SEED, 0)
    ss.setdefault(state.RUN_HISTORY, [])


def sidebar() -> RunRequest:
    """Model, prompt, lengths, sampling and the Run button, shared by all pages; returns the request."""
    _init_defaults()
    request = RunRequest()
    with st.sidebar:
        st.selectbox("Model", list(MODEL_CHOICES), format_func=MODEL_CHOICES.get, key=state.MODEL,
                     index=list(MODEL_CHOICES).index(DEFAULT_MODEL) if DEFAULT_MODEL in MODEL_CHOICES else 0)
        cols = st.columns(2)
        cols[0].selectbox("Device", ["auto", "cpu", "cuda", "mps"], key=state.DEVICE)
        cols[1].selectbox("Dtype", ["float32", "bfloat16", "float16"], key=state.DTYPE)
        lm = current_model()
        if lm is not None:
            params = f"{lm.config.n_params / 1e6:,.0f} M" if lm.config.n_params >= 1e6 else f"{lm.config.n_params / 1e3:,.0f} K"
            st.caption(f"In use: **{lm.device}** · **{lm.dtype_name}** · {params} parameters · "
                       f"context {lm.config.max_seq_len:,} tokens")
        request.lm = lm

        labels = {ex.key: ex.label for ex in prompts.examples()}
        st.selectbox("Example prompt", list(labels), format_func=labels.get, key=state.EXAMPLE, on_change=_apply_example)
        text = st.text_area("Prompt (edit freely)", key=state.PROMPT, height=140)
        fit = st.checkbox("Use exactly N prompt tokens (trim or repeat the text)", key=state.FIT_PROMPT,
                          help="On: the text is cut to its first N tokens, or repeated until it has N. Off: sent as typed.")
        st.slider("Prompt length N (tokens)", 1, PROMPT_TOKENS_MAX, key=state.PROMPT_TOKENS, disabled=not fit)
        _clamp(state.MAX_NEW_TOKENS, 1, OUTPUT_TOKENS_MAX)
        max_new = st.slider("Output length (max new tokens)", 1, OUTPUT_TOKENS_MAX, key=state.MAX_NEW_TOKENS)
        chat = st.toggle("Wrap in the model's chat template", key=state.CHAT)
        request.live_chart = st.toggle(
            "Live latency chart during generation", key=state.LIVE_CHART,
            help="Redraws the chart about once a second during a run. The browser's drawing shares this machine's "
                 "CPU with the model, so on a small machine turn it off for the cleanest timings.")
        with st.expander("Sampling (temperature 0 = greedy)"):
            st.slider("Temperature", 0.0, 2.0, step=0.05, key=state.TEMPERATURE)
            st.number_input("Top-k (0 = off)", 0, 50_000, step=1, key=state.TOP_K)
            st.slider("Top-p", 0.05, 1.0, step=0.05, key=state.TOP_P)
            st.number_input("Seed", 0, 2**31 - 1, step=1, key=state.SEED)
        request.chat, request.max_new_tokens = chat, int(max_new)
        request.sampling = dict(temperature=float(st.session_state[state.TEMPERATURE]), top_k=int(st.session_state[state.TOP_K]),
                                top_p=float(st.session_state[state.TOP_P]), seed=int(st.session_state[state.SEED]))
        if lm is None:
            request.error = "No model is loaded: pick another model in the sidebar."
        else:
            _fit_prompt(request, text, st.session_state[state.PROMPT_TOKENS] if fit else None)
        st.button("Run", key=state.RUN, type="primary", width="stretch")
    return request


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
            request.n_prompt = len(engine.core.prompting.encode_prompt(lm, fitted.text, chat=True))
            request.prompt = fitted.text
            line += f" + chat template = **{request.n_prompt} tokens** in all"
        except engine.EngineError as exc:
            request.error = str(exc)
    st.markdown(line)
    with st.expander("Show the exact prompt sent"):
        st.text(fitted.text)
    if request.error:
        st.warning(request.error)


# ----------------------------------------------------------------------------------------------
# The run panel: runs the model when Run was pressed, live, above whatever page is open
# ----------------------------------------------------------------------------------------------
def run_panel(request: RunRequest) -> None:
    """On the rerun caused by Run: generate with live progress, then store the finished Trace.

    Only a complete trace is stored, so a page switch or a new click mid-run (Streamlit stops the
    script) leaves the previous results untouched.
    """
    if not st.session_state.get(state.RUN):
        return
    if request.error or request.lm is None:
        st.session_state[state.LAST_ERROR] = request.error
        st.error(f"Cannot run: {request.error}")
        return
    lm = request.lm
    capture_layers = None
    if request.n_prompt > FULL_CAPTURE_MAX_TOKENS:
        n = lm.config.n_layers
        capture_layers = sorted({round(i * (n - 1) / (CAPTURED_LAYERS_LONG - 1)) for i in range(CAPTURED_LAYERS_LONG)})
    with st.status(f"Running {lm.name}: {request.n_prompt} prompt tokens → up to {request.max_new_tokens} new tokens…",
                   expanded=True) as status:
        bar = st.progress(0.0, text="Prefill: reading the whole prompt in one pass (the valley)…")
        text_box, chart_box = st.empty(), st.empty()
        last_draw = [time.perf_counter(), 0]  # time of the last redraw (first one after a second), redraw count

        last_text = [0.0]

        def on_step(trace) -> None:
            # Every update is sent to the browser while the next steps run, and on a small machine that
            # traffic competes with the model for the CPU: update sparingly so the timings stay clean.
            done, now = trace.n_output, time.perf_counter()
            if now - last_text[0] > LIVE_TEXT_EVERY_S:
                bar.progress(min(done / request.max_new_tokens, 1.0),
                             text=f"Decode: token {done} of up to {request.max_new_tokens} (the bridge, one at a time)")
                text_box.text("".join(trace.output_tokens))
                last_text[0] = now
            if request.live_chart and now - last_draw[0] > LIVE_CHART_EVERY_S:
                _draw_live_chart(chart_box, trace, last_draw)
                last_draw[0] = time.perf_counter()

        try:
            trace = engine.generate(lm, request.prompt, request.max_new_tokens, chat=request.chat, on_step=on_step,
                                    **request.sampling)
            # the attention replay (explicit softmax path) runs after timing, exactly as capture_attention=True does
            bar.progress(1.0, text="Timing done. Replaying the run to capture attention for the Prefill and Decode pages "
                                   "(not timed)…")
            start = time.perf_counter()
            trace.attention = engine.capture_attention(lm, trace.prompt_ids, trace.output_ids, capture_layers)
            trace.capture_seconds = time.perf_counter() - start
            trace.settings["capture_attention"] = True
        except engine.EngineError as exc:
            _fail(status, str(exc))
            return
        except (RuntimeError, ValueError, MemoryError) as exc:  # e.g. a dtype the device cannot run
            _fail(status, f"the run failed ({type(exc).__name__}: {exc})")
            return
        _draw_live_chart(chart_box, trace, last_draw)
        _store(trace)
        status.update(label=f"Run finished: {trace.n_prompt} → {trace.n_output} tokens, TTFT {trace.prefill_seconds * 1000:,.0f} ms, "
                            f"total {trace.total_seconds:,.2f} s (warm-up {trace.warmup_seconds:.2f} s and attention capture "
                            f"{trace.capture_seconds:.2f} s not counted)", state="complete", expanded=False)


LIVE_TEXT_EVERY_S = 0.3  # refresh the streamed text and progress bar at most this often
LIVE_CHART_EVERY_S = 1.0  # redraw the live chart at most this often (drawing is outside the timed region,
# but the browser renders while later steps run)


def _draw_live_chart(box, trace, draws: list) -> None:
    draws[1] += 1
    fig = fig_timing.itl_figure(trace.prefill_seconds, [s.seconds for s in trace.steps], title="Live: each token's latency",
                                height=300)
    box.plotly_chart(fig, width="stretch", key=f"live_itl_{draws[1]}", theme=None)


def _fail(status, message: str) -> None:
    st.session_state[state.LAST_ERROR] = message
    status.update(label="The run did not complete", state="error", expanded=True)
    st.error(f"Cannot run: {message}")


def _store(trace) -> None:
    """Keep the finished trace; older runs keep their timings but drop bulky attention captures."""
    history = [replace(t, attention=None) if t.attention is not None else t for t in st.session_state.get(state.RUN_HISTORY, [])]
    st.session_state[state.RUN_HISTORY] = history + [trace]
    st.session_state[state.LAST_TRACE] = trace
    st.session_state[state.LAST_ERROR] = None
