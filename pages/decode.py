"""Decode — the bridge: one token per step, each step reads all weights and the whole KV cache (layout only)."""
import time

import streamlit as st

from ui import fig_attention, fig_kvcache, measure, phase_numbers, server, state

st.title("Decode — the bridge")
st.markdown(
    "At the second bend riders cross a **single-plank bridge one at a time**: each decode step feeds exactly "
    "**one** token, because the next token depends on this one. Yet that one token must stream **every weight** "
    "of the model and the **whole KV cache** (the keys and values of all earlier tokens) from memory, and "
    "does only a few FLOPs per byte read (matrix × vector): decode is **memory-bound**, and its cost is the gap "
    "between tokens."
)

trace = server.store().last_trace
if trace is None:
    st.info("👈 Press **Run** in the sidebar, then step through the generation here token by token: the text, "
            "the KV cache growing one column per token, its byte count and each new token's attention.")
    st.stop()
if trace.model_config is None or trace.kv_key_norms is None:
    st.info(measure.outside_only(trace, "its KV cache or each token's attention"))
    st.stop()

cfg = trace.model_config
n_positions = len(trace.steps) + 1
layer_options = list(range(cfg.n_layers))
if state.DECODE_LAYER not in st.session_state and trace.attention is not None and trace.attention.layers:
    st.session_state[state.DECODE_LAYER] = trace.attention.layers[0]  # a layer captured with the run
head_options = [None] + list(range(cfg.n_heads))
kv_head_options = [None] + list(range(cfg.n_kv_heads))
for key, options in ((state.DECODE_LAYER, layer_options), (state.DECODE_HEAD, head_options),
                     (state.DECODE_KV_HEAD, kv_head_options), (state.DECODE_POSITION, range(n_positions))):
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]  # a new run (other length or model): start again from the defaults


def move(delta: int) -> None:
    position = st.session_state.get(state.DECODE_POSITION, 0) + delta
    st.session_state[state.DECODE_POSITION] = max(0, min(n_positions - 1, position))


if st.session_state.pop(state.DECODE_AUTOPLAY_DONE, False):
    st.session_state[state.DECODE_AUTOPLAY] = False  # autoplay reached the last token: stop (no endless redraws)
controls = st.columns([1, 1, 1.3, 1.7])
controls[0].button("◀ Previous", key=state.DECODE_PREV, on_click=move, args=(-1,), width="stretch")
controls[1].button("Next token ▶", key=state.DECODE_NEXT, on_click=move, args=(1,), type="primary", width="stretch")
autoplay = controls[2].toggle("Autoplay", key=state.DECODE_AUTOPLAY)
speed = controls[3].select_slider("Seconds per token", options=[0.25, 0.5, 1.0, 2.0, 3.0, 5.0], value=1.0,
                                  key=state.DECODE_SPEED)


playing = autoplay and st.session_state.get(state.DECODE_POSITION, 0) < n_positions - 1


@st.fragment(run_every=speed if playing else None)
def step_view() -> None:
    """Everything that changes with the step; autoplay reruns only this part, advancing one token each time."""
    if playing:  # advance once per period, whatever caused this rerun
        now = time.monotonic()
        if now - st.session_state.get(state.DECODE_LAST_TICK, now) >= 0.9 * speed:
            move(1)
            st.session_state[state.DECODE_LAST_TICK] = now
        st.session_state.setdefault(state.DECODE_LAST_TICK, now)
        if st.session_state.get(state.DECODE_POSITION, 0) >= n_positions - 1:
            st.session_state[state.DECODE_AUTOPLAY_DONE] = True
            st.rerun()  # the whole page again, now without a timer: autoplay stops at the last token
    else:
        st.session_state.pop(state.DECODE_LAST_TICK, None)
    if n_positions > 1:
        st.slider("Step (0 = the first token, made by prefill)", 0, n_positions - 1, key=state.DECODE_POSITION)
    view = phase_numbers.decode_view(trace, st.session_state.get(state.DECODE_POSITION, 0))

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
        st.caption(f"Why memory-bound: this step {phase_numbers.bandwidth_text(view)}, for about 2 FLOPs per weight.")

    kv_tab, attention_tab, heads_tab = st.tabs(["KV cache, layer by layer", "The new token's attention", "Shared KV heads"])
    with kv_tab:
        st.columns([1, 2])[0].selectbox("KV head", kv_head_options, key=state.DECODE_KV_HEAD,
                     format_func=lambda k: "mean over KV heads" if k is None else f"KV head {k}")
        kv_figure = fig_kvcache.kv_cache_figure(trace, view.position, st.session_state.get(state.DECODE_KV_HEAD))
        st.plotly_chart(kv_figure, theme=None)
        st.caption("Each column is one cached token (colour = size of its key / value vector in that layer). "
                   "Prefill wrote all orange-band columns at once; each decode step adds one blue-band column "
                   "(red outline = written by this step), in every layer.")
    with attention_tab:
        pick = st.columns(2)
        layer = pick[0].selectbox("Layer", layer_options, key=state.DECODE_LAYER,
                                  format_func=lambda i: f"layer {i}")
        head = pick[1].selectbox("Head", head_options, key=state.DECODE_HEAD,
                                 format_func=lambda h: "mean over heads" if h is None else f"head {h}")
        if server.ensure_layer(trace, layer):
            st.plotly_chart(fig_attention.attention_row_figure(trace, view.position, layer, head), theme=None)
        st.caption("One query (the token just fed in) against every cached key: a 1 × S row, not an S × S matrix. "
                   "Small arithmetic, but the whole cache has to be read to do it.")
    with heads_tab:
        st.plotly_chart(fig_kvcache.gqa_figure(cfg.n_heads, cfg.n_kv_heads), theme=None)
        st.caption(f"Grouped-query attention: only {cfg.n_kv_heads} key/value heads are cached per layer, "
                   f"each read by {cfg.n_heads // max(1, cfg.n_kv_heads)} query heads — the cache is "
                   f"{cfg.n_heads // max(1, cfg.n_kv_heads)}× smaller than with one KV head per query head.")


step_view()
