"""The sidebar every page shares (layout only): it returns the RunRequest app.py hands to ui/controls/run_panel.py.

The model itself lives in the engine worker (ui/engine_link/worker_link.py); here it is known by its description:
config, tokenizer, sizes.
"""
from __future__ import annotations

import os

import streamlit as st

from engine.core.prompting import encode_prompt
from engine.core.sampling_params import SamplingParams
from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL as BUNDLED_DEFAULT
from ui import state
from ui.controls import demo_panel, glossary_panel, preset_buttons, theme_toggle
from ui.controls.run_panel import DEFAULT_OUTPUT_TOKENS, RunRequest
from ui.demo import recorded
from ui.engine_link import job_progress, server_link, worker_link
from ui.room import follow
from ui.text import prompts

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
        return job_progress.model_info(spec)
    except EngineError as exc:
        st.error(f"Could not load {spec.name} on device '{spec.device}' ({spec.dtype}): {exc}")
        return None


# --- The shared sidebar: model, prompt (fitted to N tokens), output length, sampling, Run --------------------------
DEFAULT_EXAMPLE = "summarisation"
DEFAULT_PROMPT_TOKENS = 64
EXACT_OUTPUT_LABEL = "Exact output length (go on past the model's end-of-text)"
EXACT_OUTPUT_HELP = ("On: the run writes exactly the output length above, as serving benchmarks do (vLLM's ignore_eos), "
                     "so the bridge is measured at the length you chose; the page says where the model's own answer "
                     "ended. Off: the model's end-of-text token ends the run, sometimes after one token.")


def _apply_example() -> None:
    """Picking an example fills the prompt box with its text."""
    st.session_state[state.PROMPT] = prompts.example(st.session_state[state.EXAMPLE]).text


def defaults() -> dict:
    """What a fresh session's sidebar holds (session-state key -> value); "Reset to defaults" puts them back."""
    return {state.MODEL: DEFAULT_MODEL if DEFAULT_MODEL in MODEL_CHOICES else next(iter(MODEL_CHOICES)),
            state.DEVICE: "auto", state.DTYPE: "float32", state.KERNELS: "fast",
            state.EXAMPLE: DEFAULT_EXAMPLE, state.PROMPT: prompts.example(DEFAULT_EXAMPLE).text, state.FIT_PROMPT: True,
            state.PROMPT_TOKENS: DEFAULT_PROMPT_TOKENS, state.MAX_NEW_TOKENS: DEFAULT_OUTPUT_TOKENS, state.CHAT: False,
            state.IGNORE_EOS: True,
            state.LIVE_CHART: True, state.QUIET_TIMING: False, state.TEMPERATURE: 0.0, state.TOP_K: 0, state.TOP_P: 1.0, state.SEED: 0}


def reset_to_defaults() -> None:
    """The Reset button's callback: every sidebar setting as a fresh session has it; runs and presenter mode stay."""
    st.session_state.update(defaults())


def sidebar() -> RunRequest:
    """Model, prompt, lengths, sampling and the Run button, shared by all pages; returns the request."""
    for key, value in defaults().items():
        st.session_state.setdefault(key, value)
    preset_buttons.apply_pending()  # a one-click preset's lengths, before the widgets that show them
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
        prompt_max, output_max = (min(cap or high, high) for cap, high in zip(caps, (prompts.PROMPT_TOKENS_MAX, prompts.OUTPUT_TOKENS_MAX)))
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
            if getattr(lm, "kernel_why", ""):  # measured figures: a paragraph, folded so the sidebar stays short
                with st.expander("Why these kernels (measured here)"):
                    st.caption(f"Why these kernels — {lm.kernel_why}")
        request.lm = lm

        # A widget whose value lives in session state also gets that value as its own default: a browser that mounts it
        # from a later script run's message (one without the value, e.g. Run pressed before a slow browser drew the first
        # run's sidebar) otherwise shows, and sends back, the widget's bare default: an empty prompt box, a slider at 1.
        ss = st.session_state
        labels = {ex.key: ex.label for ex in prompts.examples()}
        st.selectbox("Example prompt", list(labels), format_func=labels.get, key=state.EXAMPLE, on_change=_apply_example)
        text = st.text_area("Prompt (edit freely)", value=ss[state.PROMPT], key=state.PROMPT, height=140)
        fit = st.checkbox("Use exactly N prompt tokens (trim or repeat the text)", value=ss[state.FIT_PROMPT], key=state.FIT_PROMPT,
                          help="On: the text is cut to its first N tokens, or repeated until it has N. Off: sent as typed.")
        _clamp(state.PROMPT_TOKENS, 1, prompt_max)
        st.slider("Prompt length N (tokens)", 1, prompt_max, value=ss[state.PROMPT_TOKENS], key=state.PROMPT_TOKENS, disabled=not fit)
        _clamp(state.MAX_NEW_TOKENS, 1, output_max)
        max_new = st.slider("Output length (max new tokens)", 1, output_max, value=ss[state.MAX_NEW_TOKENS], key=state.MAX_NEW_TOKENS)
        st.checkbox(EXACT_OUTPUT_LABEL, value=ss[state.IGNORE_EOS], key=state.IGNORE_EOS, help=EXACT_OUTPUT_HELP)
        chat = st.toggle("Wrap in the model's chat template", key=state.CHAT)
        request.live_chart = st.toggle(
            "Live latency chart during generation", value=ss[state.LIVE_CHART], key=state.LIVE_CHART,
            help="Redraws the chart every two seconds during a run (not in its last second). The browser's drawing shares this machine's "
                 "CPU with the model, so on a small machine turn it off for the cleanest timings.")
        request.quiet = st.toggle(
            "Quiet timing (draw at the end)", key=state.QUIET_TIMING,
            help="Nothing is drawn while the model runs: no live chart, no streamed text, no moving progress bar; "
                 "both are drawn when the run ends. The page's own drawing then takes no CPU from the model (each run says how "
                 "long it waited for a CPU, next to TTFT and TPOT).")
        with st.expander("Sampling (temperature 0 = greedy)"):
            st.slider("Temperature", 0.0, 2.0, step=0.05, key=state.TEMPERATURE)
            st.number_input("Top-k (0 = off)", 0, 50_000, step=1, key=state.TOP_K)
            st.slider("Top-p", 0.05, 1.0, value=ss[state.TOP_P], step=0.05, key=state.TOP_P)
            st.number_input("Seed", 0, 2**31 - 1, step=1, key=state.SEED)
        request.chat, request.max_new_tokens = chat, int(max_new)
        request.sampling = SamplingParams(temperature=float(ss[state.TEMPERATURE]), top_k=int(ss[state.TOP_K]),
                                          top_p=float(ss[state.TOP_P]), seed=int(ss[state.SEED]),
                                          ignore_eos=bool(ss[state.IGNORE_EOS]))
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
    threads = server_link.options().threads
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
