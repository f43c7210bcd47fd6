"""Prefill — the valley of Longmen Bay: the whole prompt crosses side by side in one pass (layout only; numbers come from ui/)."""
import streamlit as st

from ui import state
from ui.controls import demo_panel, local_replay, presenter, stepper
from ui.demo import recorded
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_attention
from ui.text import bend_numbers, card_numbers, phase_numbers, story_text

st.title("Prefill — the valley of Longmen Bay")
presenting = presenter.active()
if not presenting:
    st.markdown(story_text.PREFILL_INTRO)

trace = worker_link.store().last_trace
demo_panel.recorded_banner()
if trace is None:
    presenter.press_run(": this page then shows the real attention matrix of your prompt, "
                        "the prefill time and the FLOP/s the valley achieved.")
    st.stop()
trace = local_replay.local_replay(trace, "the model's attention matrix or the FLOPs of its prefill")  # a server's run: replayed
if trace is None:
    st.stop()

# --- the measured time and the estimated work -------------------------------------------------------------
cfg = trace.model_config
flops = phase_numbers.prefill_flops_of(trace)
if presenting:
    layout = st.columns([1, 2.2], gap="medium")
    numbers, stage = layout[0].container(), layout[1].container()
    cols = [numbers] * 4
else:
    cols = st.columns([0.8, 1.1, 1.1, 1.4])
cols[0].metric("Prompt tokens (T)", f"{trace.n_prompt}" + (f" × {trace.batch_size}" if trace.batch_size > 1 else ""))
cols[1].metric("Prefill time = TTFT (measured)", f"{trace.prefill_seconds * 1000:.1f} ms")
cols[2].metric("Prefill work (estimate)", phase_numbers.si(flops.total, "FLOP"))
cols[3].metric("Achieved (estimate ÷ measured)", phase_numbers.si(flops.total / max(trace.prefill_seconds, 1e-12), "FLOP/s"))
st.caption(
    f"Estimate: {phase_numbers.PREFILL_FORMULA}, with W = {cfg.matmul_params:,}, L = {cfg.n_layers} layers, "
    f"H·D = {cfg.n_heads}·{cfg.head_dim}, V·C = {cfg.vocab_size:,}·{cfg.d_model}, T = {trace.n_prompt}, "
    f"B = {trace.batch_size}: matrix products {phase_numbers.si(flops.matmul, 'FLOP')} + attention "
    f"{phase_numbers.si(flops.attention, 'FLOP')} + LM head {phase_numbers.si(flops.lm_head, 'FLOP')}. "
    f"Time measured in this run on {trace.env.get('device_name', trace.device)} ({trace.dtype})."
)
if not presenting and card_numbers.measured_here(trace):  # MFU against the measured peaks; where the valley turns
    store = worker_link.store()
    st.subheader("The valley on this machine: MFU, and where it turns compute-bound")
    peaks = job_progress.session_peaks(trace.device, trace.dtype, bend_numbers.PEAKS_NEEDED)
    if (mfu := bend_numbers.utilisation(trace, peaks, "MFU")) is not None:
        st.metric("MFU of this prefill (measured here)", f"{mfu.value:.0%}")
        st.caption(mfu.words)
    st.markdown(bend_numbers.valley_measured(store.labs.get(state.SWEEP_RESULTS, {}).get("prompt"), trace.model))
    if peaks is not None:
        st.dataframe(bend_numbers.crossovers_by_card(cfg, trace.model, trace.dtype, peaks, trace,
                                                     trace.n_prompt + trace.n_output), hide_index=True, width="stretch")
        st.caption(story_text.CROSSOVER_NOTE)

# --- layer / head pickers (redrawing never re-runs the model: everything comes from the trace) -------------
layer_options = recorded.layer_choices(trace, cfg.n_layers)
head_options = [None] + list(range(cfg.n_heads))
if state.PREFILL_LAYER not in st.session_state and trace.attention is not None and trace.attention.layers:
    st.session_state[state.PREFILL_LAYER] = trace.attention.layers[0]  # a layer captured with the run
for key, options in ((state.PREFILL_LAYER, layer_options), (state.PREFILL_HEAD, head_options)):
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]  # a new run with another model: fall back to the default
if presenting:  # the still of the current step, large, driven by the keyboard (ui/controls/presenter.py)
    n_positions = len(trace.steps) + 1
    layer = st.session_state.get(state.PREFILL_LAYER, layer_options[0])
    head, scale = st.session_state.get(state.PREFILL_HEAD), st.session_state.get(state.PREFILL_SCALE, "log")
    if trace.attention is None or not job_progress.ensure_layer(trace, layer):
        st.stop()
    with stage:
        playing, speed = stepper.controls(stepper.PREFILL, n_positions, next_label="Next row ▶")
        presenter.keyboard(state.PREFILL_NEXT, state.PREFILL_PREV, state.PREFILL_AUTOPLAY)

        @st.fragment(run_every=speed if playing else None)
        def step_view() -> None:
            """The matrix at the current step: autoplay reruns only this part, one row per period."""
            step = stepper.tick(stepper.PREFILL, n_positions, playing, speed)
            presenter.chart(fig_attention.phase_step_figure(trace, layer, head, step, scale, height=450),
                            key="prefill_step", name="prefill_vs_decode")

        step_view()
    st.stop()
pick = st.columns([1, 1, 1, 1.6])
layer = pick[0].selectbox("Layer", layer_options, key=state.PREFILL_LAYER,
                          format_func=lambda i: f"layer {i}")
head = pick[1].selectbox("Head", head_options, key=state.PREFILL_HEAD,
                         format_func=lambda h: "mean over heads" if h is None else f"head {h}")
scale = pick[2].radio("Colours", ["linear", "log"], index=1, key=state.PREFILL_SCALE, horizontal=True,
                      help="log: small weights become visible (colour = log10 of the weight, floored at 0.0001)")
pick[3].caption("Each row is one query token; it may only look left (earlier tokens). The grey upper "
                "triangle is the causal mask: positions a token cannot see, not zeros.")
if not job_progress.ensure_layer(trace, layer):
    st.stop()

matrix_tab, animation_tab = st.tabs(["The T × T matrix", "Prefill vs decode on the same matrix"])
with matrix_tab:
    presenter.chart(fig_attention.attention_heatmap(trace, layer, head, scale), key="prefill_matrix",
                    name="prefill_attention")
    st.caption("All rows of this matrix were computed **at the same time**, in one pass: that is the valley.")
with animation_tab:
    presenter.chart(fig_attention.phase_animation(trace, layer, head, scale), key="prefill_animation",
                    name="prefill_vs_decode_animation")
    st.caption(
        f"Press ▶ Play or drag the slider. Frame 0: prefill fills all {trace.n_prompt} orange rows in one pass. "
        f"Each later frame is one decode step adding a single blue row ({len(trace.steps)} steps): "
        "the bridge, one rider at a time."
    )

if trace.capture_seconds:
    st.caption(f"Attention was captured by replaying the run with the explicit softmax path afterwards "
               f"({trace.capture_seconds:.2f} s, not included in the timings above).")
