"""Decode — the bridge: one token per step, each step reads all weights and the whole KV cache (layout only)."""
import streamlit as st

from ui import state
from ui.controls import demo_panel, local_replay, presenter, stepper
from ui.demo import recorded
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_attention, fig_kvcache
from ui.text import bend_numbers, card_numbers, lab_text, phase_numbers, story_text

presenting = presenter.active()
if presenting:  # the title shares its row with the step controls: the projector's height goes to the figures
    title_col, controls_col = st.columns([1, 2.3], vertical_alignment="center")
    title_col.title("Decode — the bridge")
else:
    st.title("Decode — the bridge")
    st.markdown(story_text.DECODE_INTRO)

trace = worker_link.store().last_trace
demo_panel.recorded_banner()
if trace is None:
    presenter.press_run(", then step through the generation here token by token: the text, "
                        "the KV cache growing one column per token, its byte count and each new token's attention.")
    st.stop()
trace = local_replay.local_replay(trace, "its KV cache or each token's attention", needs_kv=True)  # a server's run: replayed
if trace is None:
    st.stop()

cfg = trace.model_config
PRESENTER_FIGURE_HEIGHT = 245  # two figures stacked under the title row fill a 720-pixel-high screen
n_positions = len(trace.steps) + 1
layer_options = recorded.layer_choices(trace, cfg.n_layers)
if state.DECODE_LAYER not in st.session_state and trace.attention is not None and trace.attention.layers:
    st.session_state[state.DECODE_LAYER] = trace.attention.layers[0]  # a layer captured with the run
head_options = [None] + list(range(cfg.n_heads))
kv_head_options = [None] + list(range(cfg.n_kv_heads))
for key, options in ((state.DECODE_LAYER, layer_options), (state.DECODE_HEAD, head_options),
                     (state.DECODE_KV_HEAD, kv_head_options)):
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]  # a new run (other length or model): start again from the defaults

with controls_col if presenting else st.container():
    playing, speed = stepper.controls(stepper.DECODE, n_positions)
presenter.keyboard(state.DECODE_NEXT, state.DECODE_PREV, state.DECODE_AUTOPLAY)


@st.fragment(run_every=speed if playing else None)
def step_view() -> None:
    """Everything that changes with the step; autoplay reruns only this part, advancing one token each time."""
    position = stepper.tick(stepper.DECODE, n_positions, playing, speed)
    if n_positions > 1 and not presenting:
        st.slider("Step (0 = the first token, made by prefill)", 0, n_positions - 1, key=state.DECODE_POSITION)
    view = phase_numbers.decode_view(trace, position)
    if presenting:
        presenter_view(view)
        return

    with st.container(border=True):
        st.markdown(phase_numbers.highlighted_text_markdown(view) or "_(nothing generated)_")
    st.markdown(phase_numbers.step_sentence(view))

    numbers = st.columns(4)
    numbers[0].metric("TTFT (measured)" if view.phase == "prefill" else "This step (measured)", f"{view.seconds * 1000:.1f} ms")
    numbers[1].metric("Tokens in the KV cache", f"{view.kv_tokens}")
    numbers[2].metric("KV cache bytes", phase_numbers.binary_bytes(view.kv_bytes))
    numbers[3].metric("KV bytes per token", f"{trace.kv_bytes_per_token:,} B")
    st.caption(f"KV bytes per token = {phase_numbers.kv_formula_text(cfg, trace.dtype)}.  "
               f"Cache now: {phase_numbers.kv_counter_text(trace.kv_bytes_per_token, view.kv_tokens, trace.batch_size)}.")
    if view.phase == "decode":
        st.caption(story_text.decode_why(phase_numbers.bandwidth_text(view), phase_numbers.bytes_per_number(trace.dtype),
                                         trace.dtype, view.riders))

    kv_tab, attention_tab, heads_tab = st.tabs(["KV cache, layer by layer", "The new token's attention", "Shared KV heads"])
    with kv_tab:
        st.columns([1, 2])[0].selectbox("KV head", kv_head_options, key=state.DECODE_KV_HEAD,
                     format_func=lambda k: "mean over KV heads" if k is None else f"KV head {k}")
        kv_figure = fig_kvcache.kv_cache_figure(trace, view.position, st.session_state.get(state.DECODE_KV_HEAD))
        presenter.chart(kv_figure, key="decode_kv", name="kv_cache")
        st.caption("Each column is one cached token (colour = size of its key / value vector in that layer). "
                   "Prefill wrote all orange-band columns at once; each decode step adds one blue-band column "
                   "(red outline = written by this step), in every layer.")
    with attention_tab:
        pick = st.columns(2)
        layer = pick[0].selectbox("Layer", layer_options, key=state.DECODE_LAYER,
                                  format_func=lambda i: f"layer {i}")
        head = pick[1].selectbox("Head", head_options, key=state.DECODE_HEAD,
                                 format_func=lambda h: "mean over heads" if h is None else f"head {h}")
        if job_progress.ensure_layer(trace, layer):
            presenter.chart(fig_attention.attention_row_figure(trace, view.position, layer, head), key="decode_row",
                            name="attention_row")
        st.caption("One query (the token just fed in) against every cached key: a 1 × S row, not an S × S matrix. "
                   "Small arithmetic, but the whole cache has to be read to do it.")
    with heads_tab:
        presenter.chart(fig_kvcache.gqa_figure(cfg.n_heads, cfg.n_kv_heads), key="decode_gqa", name="shared_kv_heads")
        st.caption(story_text.gqa_caption(cfg.n_heads, cfg.n_kv_heads))


def presenter_view(view) -> None:
    """The step for the back of the room: the text with its new token and four numbers beside the two pictures,
    the cache over the new token's attention, all within a 1280×720 projector's screen."""
    text_col, kv_col = st.columns([2, 3], gap="medium")
    with text_col:
        with st.container(border=True):
            st.markdown(phase_numbers.highlighted_text_markdown(view) or "_(nothing generated)_")
        st.markdown(phase_numbers.step_sentence(view))
        top, bottom = st.columns(2), st.columns(2)
        top[0].metric("TTFT" if view.phase == "prefill" else "This step", f"{view.seconds * 1000:.1f} ms")
        top[1].metric("Tokens cached", f"{view.kv_tokens}")
        bottom[0].metric("KV cache", phase_numbers.binary_bytes(view.kv_bytes))
        bottom[1].metric("Riders" if view.riders > 1 else "Per token", f"{view.riders}" if view.riders > 1
                         else phase_numbers.binary_bytes(trace.kv_bytes_per_token))
    with kv_col:
        kv_figure = fig_kvcache.kv_cache_figure(trace, view.position, st.session_state.get(state.DECODE_KV_HEAD),
                                                height=PRESENTER_FIGURE_HEIGHT, compact=True)
        presenter.chart(kv_figure, key="decode_kv", name="kv_cache")
        layer = st.session_state.get(state.DECODE_LAYER, layer_options[0])
        if job_progress.ensure_layer(trace, layer):
            presenter.chart(fig_attention.attention_row_figure(trace, view.position, layer, st.session_state.get(state.DECODE_HEAD),
                                                               height=PRESENTER_FIGURE_HEIGHT, compact=True),
                            key="decode_row", name="attention_row")


step_view()
if presenting or not card_numbers.measured_here(trace):
    st.stop()
# --- MBU against this machine's measured peaks, where the bridge turns compute-bound, the KV-cache wall -------
store = worker_link.store()
st.subheader("The bridge on this machine: MBU, where it turns compute-bound, the KV-cache wall")
peaks = job_progress.session_peaks(trace.device, trace.dtype, bend_numbers.PEAKS_NEEDED)
if (mbu := bend_numbers.utilisation(trace, peaks, "MBU")) is not None:
    st.metric("MBU of this run's median decode step (measured here)", f"{mbu.value:.0%}")
    st.caption(mbu.words)
st.markdown(bend_numbers.bridge_measured(store.labs.get(state.BATCH_RESULT), trace.model))
if peaks is not None:
    st.dataframe(bend_numbers.crossovers_by_card(cfg, trace.model, trace.dtype, peaks, trace,
                                                 trace.n_prompt + trace.n_output), hide_index=True, width="stretch")
    st.caption(story_text.CROSSOVER_NOTE)
start = st.button("▶ Measure decode steps up to the model's window", key=state.CONTEXT_MEASURE,
                  disabled=worker_link.lab_refusal() is not None, help=worker_link.lab_refusal())
measured = job_progress.lab_run(state.CONTEXT_JOB, start, "sweeps.contexts",
                               label="Timing decode steps over KV caches of growing length…")
if measured is not None:
    store.labs[state.CONTEXT_RESULT] = measured
sweep = store.labs.get(state.CONTEXT_RESULT)
if sweep is not None and sweep.model == trace.model:
    if banner := lab_text.busy_banner(sweep.cpu_wait):
        st.warning(banner)
    presenter.chart(fig_kvcache.context_figure(sweep), key="decode_context", name="decode_step_by_context")
    st.markdown(bend_numbers.context_words(sweep))
    st.caption(lab_text.cpu_wait_words(sweep.cpu_wait))
st.dataframe(bend_numbers.wall_table(cfg, trace.model, trace.dtype, peaks, trace, cfg.max_seq_len), hide_index=True,
             width="stretch")
st.caption(bend_numbers.wall_words(cfg, trace.model, cfg.max_seq_len))
