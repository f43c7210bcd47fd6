"""Roofline lab: this machine's measured roof with both phases on it, and the card model on every card (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_cards, fig_roofline
from ui.text import card_numbers as cn
from ui.text import lab_text
from ui.text import roofline_numbers as rn

st.title("Roofline — where each bend sits, and which stage eats the money")
st.markdown(rn.INTRO)
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)

store = worker_link.store()


def measured_section(lm):
    """This machine's roof, measured, with the prefill and decode points of a real run on it; returns the peaks."""
    st.subheader(f"This machine: {lm.device}, {lm.dtype}, {lm.name}")
    remeasure = st.button("↻ Measure again (the peaks, then 64 prompt + 16 output tokens)", key=state.ROOF_MEASURE_RUN,
                          disabled=not labs_open)
    kept = store.labs.setdefault(state.PEAKS, {})
    peaks = None if remeasure else kept.get((lm.device, lm.dtype))
    if peaks is None:
        peaks = job_progress.lab_run(state.PEAKS_JOB, True, "hardware.peaks",
                                    label="Measuring this machine's peaks (a 256 MiB copy and read, a matmul at the "
                                          "model's shapes)…")
        kept[(lm.device, lm.dtype)] = peaks
    if peaks is None:
        return None, None

    trace = store.last_trace
    source = "the last dashboard run"
    if trace is None or trace.model != lm.name or not cn.run_against_peaks(trace, peaks):  # this page measures its own
        trace, source = store.labs.get(state.ROOF_TRACE), "a small measurement made on this page"
        if trace is not None and trace.model != lm.name:
            trace = None
    if trace is None or remeasure:
        trace = job_progress.lab_run(state.ROOF_JOB, True, "sweeps.reference_run",
                                    label="Running a small measurement: 64 prompt tokens, 16 output tokens…")
        store.labs[state.ROOF_TRACE] = trace
        source = "a small measurement made on this page"

    for col, (label, value) in zip(st.columns(3), rn.peak_metrics(peaks)):
        col.metric(label, value)
    if trace is not None:
        points = rn.trace_points(trace)
        theme_toggle.plotly_chart(fig_roofline.roofline_figure(peaks.matmul_flops_per_s, peaks.copy_bytes_per_s, points))
        st.caption(f"Points from {source}: {trace.n_prompt} prompt tokens, {trace.n_output} output tokens, "
                   f"batch {trace.batch_size}. " + lab_text.MEASURED_NOTE)
        st.dataframe(fig_roofline.points_table(points, peaks.matmul_flops_per_s, peaks.copy_bytes_per_s),
                     hide_index=True, width="stretch")
        utilisation = cn.measured_utilisation(trace, peaks)
        for col, u in zip(st.columns(len(utilisation) or 1), utilisation):
            col.metric(f"{u.name} (measured here)", f"{u.value:.0%}")
            col.caption(u.words)
        st.markdown(cn.crossover_words(lm.config, lm.name, peaks, lm.dtype, trace.n_prompt + trace.n_output, trace))
    return peaks, trace


lm = widgets.current_model()
peaks, measured_run = measured_section(lm) if lm is not None else (None, None)

st.divider()
st.subheader("Every card: predicted TTFT and TPOT (the card model — estimates)")
cols = st.columns(4)
model_name = cols[0].selectbox("Model", list(rn.MODEL_PRESETS), index=list(rn.MODEL_PRESETS).index(
    "Llama-2 7B (MHA, 32 KV heads)"), key=state.ROOF_MODEL)
workload_name = cols[1].selectbox("Workload", list(rn.WORKLOAD_PRESETS), key=state.ROOF_WORKLOAD)
dtype = cols[2].selectbox("Number format", list(cn.DTYPES), format_func=cn.DTYPES.get, key=state.ROOF_DTYPE)
batch = cols[3].selectbox("Batch B (requests together)", [1, 8, 32, 128], key=state.ROOF_BATCH)
workload = rn.WORKLOAD_PRESETS[workload_name]
cards = cn.cards_with(peaks, measured_run)
table = fig_roofline.predictions(model_name, workload, dtype, batch, cards)
theme_toggle.plotly_chart(fig_roofline.prediction_bars(
    table, f"{model_name}, {workload.name} ({workload.prompt_tokens} in / {workload.output_tokens} out), B = {batch}"))
st.dataframe(table, hide_index=True, width="stretch")
st.caption(rn.CARD_MODEL_NOTE)

st.subheader("Where each bend turns compute-bound, card by card")
st.dataframe(cn.crossover_table(model_name, dtype, workload.prompt_tokens + workload.output_tokens // 2, peaks,
                                measured_run), hide_index=True, width="stretch")

st.subheader("Which stage eats the money: a request's device-seconds at B = 1 and B = 64")
cost_card = st.selectbox("Card", list(cards), index=min(1, len(cards) - 1), key=state.ROOF_COST_CARD)
costs, why_not = cn.costs_or_message(model_name, cards[cost_card], workload.prompt_tokens, workload.output_tokens,
                                     (1, 64), dtype)
if why_not:
    st.warning(why_not)
else:
    theme_toggle.plotly_chart(fig_cards.cost_figure(costs, cost_card))
    st.markdown(cn.cost_words(costs, cost_card))
    st.dataframe(fig_roofline.workload_shares(model_name, cards[cost_card], dtype), hide_index=True, width="stretch")
st.caption(rn.hardware_caption(cost_card) if cost_card in rn.HARDWARE_PRESETS else cards[cost_card].source)

st.subheader("The KV-cache wall: how many riders fit")
wall_tokens = st.selectbox("Tokens per sequence (prompt + output)", [2048, 4096, 8192], index=1,
                           key=state.ROOF_WALL_TOKENS)
wall_card = cost_card if cost_card in cn.CARDS else "NVIDIA H100 SXM"
wall = cn.kv_wall_table(cn.WALL_MODELS, wall_card, wall_tokens)
theme_toggle.plotly_chart(fig_cards.kv_wall_figure(wall, wall_card, wall_tokens))
st.markdown(cn.kv_wall_words(wall, wall_card, wall_tokens))
context, why_not = cn.tpot_by_context_or_message(model_name, wall_card, dtype, batch)
if why_not:
    st.caption(f"TPOT against the context: {why_not}")
else:
    theme_toggle.plotly_chart(fig_cards.context_figure(context, model_name, wall_card, batch))

st.subheader("H100 → H200: the same FLOP/s, 1.43× the bandwidth (spec sheets; the speed-ups: card-model estimates)")
comparison = cn.compare_cards(cn.COMPARISON_MODEL)
theme_toggle.plotly_chart(fig_cards.comparison_figure(comparison))
st.markdown(cn.comparison_words(comparison))

with st.expander("The card model's inputs: each class's efficiencies, their ranges and sources"):
    st.dataframe(rn.class_table(), hide_index=True, width="stretch")
