"""Roofline lab: this machine's measured roof with both phases on it, and spec-sheet predictions (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import lab_jobs, worker_link
from ui.figures import fig_roofline
from ui.text import lab_text
from ui.text import roofline_numbers as rn

BYTES_PER_WEIGHT = {2.0: "bf16 / fp16 (2 bytes)", 4.0: "fp32 (4 bytes)", 1.0: "int8 (1 byte)", 0.5: "4-bit (0.5 byte)"}

st.title("Roofline — which stage eats the money")
st.markdown(lab_text.ROOFLINE_INTRO)
worker_link.lab_notice()  # in a room: why this session may not start lab measurements

store = worker_link.store()


def measured_section(lm) -> None:
    """This machine's roof, measured, with the prefill and decode points of a real run on it."""
    st.subheader(f"This machine: {lm.device}, {lm.dtype}, {lm.name}")
    peaks = store.labs.setdefault(state.PEAKS, {}).get((lm.device, lm.dtype))
    if peaks is None:
        peaks = worker_link.lab_run(state.PEAKS_JOB, True, lab_jobs.HARDWARE_PEAKS,
                                    label="Measuring this machine's peaks (a 256 MiB copy, a matmul at the model's shapes)…")
        store.labs[state.PEAKS][(lm.device, lm.dtype)] = peaks
    if peaks is None:
        return

    trace = store.last_trace
    source = "the last dashboard run"
    if trace is None or trace.model != lm.name or not trace.steps or trace.model_config is None:
        trace, source = store.labs.get(state.ROOF_TRACE), "a small measurement made on this page"
        if trace is not None and trace.model != lm.name:
            trace = None
    remeasure = st.button("↻ Measure again (64 prompt + 16 output tokens)", key=state.ROOF_MEASURE_RUN)
    if trace is None or remeasure:
        trace = worker_link.lab_run(state.ROOF_JOB, True, lab_jobs.REFERENCE_RUN,
                                    label="Running a small measurement: 64 prompt tokens, 16 output tokens…")
        store.labs[state.ROOF_TRACE] = trace
        source = "a small measurement made on this page"

    for col, (label, value) in zip(st.columns(3), rn.peak_metrics(peaks)):
        col.metric(label, value)
    if trace is not None:
        points = rn.trace_points(trace)
        theme_toggle.plotly_chart(fig_roofline.roofline_figure(peaks.matmul_flops_per_s, peaks.copy_bytes_per_s, points),
                        width="stretch", theme=None)
        st.caption(f"Points from {source}: {trace.n_prompt} prompt tokens, {trace.n_output} output tokens, "
                   f"batch {trace.batch_size}. " + lab_text.MEASURED_NOTE)
        st.dataframe(fig_roofline.points_table(points, peaks.matmul_flops_per_s, peaks.copy_bytes_per_s),
                     hide_index=True, width="stretch")


lm = widgets.current_model()
if lm is not None:
    measured_section(lm)

st.divider()
st.subheader("Spec-sheet hardware: predicted TTFT and TPOT (estimates)")
cols = st.columns(3)
model_name = cols[0].selectbox("Model", list(rn.MODEL_PRESETS), key=state.ROOF_MODEL)
workload_name = cols[1].selectbox("Workload", list(rn.WORKLOAD_PRESETS), key=state.ROOF_WORKLOAD)
bpw = cols[2].selectbox("Bytes per weight", list(BYTES_PER_WEIGHT), format_func=BYTES_PER_WEIGHT.get,
                        key=state.ROOF_BYTES_PER_WEIGHT)
cols = st.columns([2, 2, 1])
batch = cols[2].selectbox("Batch B (requests together)", [1, 8, 32, 128], key=state.ROOF_BATCH)
mfu = cols[0].slider("Prefill MFU (fraction of peak FLOP/s reached)", 0.1, 1.0, rn.DEFAULT_MFU, 0.05,
                     key=state.ROOF_MFU)
bw_eff = cols[1].slider("Decode bandwidth efficiency", 0.1, 1.0, rn.DEFAULT_BW_EFF, 0.05, key=state.ROOF_BW_EFF)

cfg, workload = rn.MODEL_PRESETS[model_name], rn.WORKLOAD_PRESETS[workload_name]
table = fig_roofline.predictions(cfg, workload, bpw, mfu, bw_eff, batch)
theme_toggle.plotly_chart(fig_roofline.prediction_bars(
    table, f"{model_name}, {workload.name} ({workload.prompt_tokens} in / {workload.output_tokens} out), B = {batch}"),
    width="stretch", theme=None)
st.dataframe(table, hide_index=True, width="stretch")
st.markdown(lab_text.BATCH_NOTE)
st.markdown(lab_text.FORMULAS)
st.caption(lab_text.HARDWARE_NOTE)

st.subheader("Which phase dominates each workload?")
hw_name = st.selectbox("Hardware", list(rn.HARDWARE_PRESETS), index=1, key=state.ROOF_HARDWARE)
st.dataframe(fig_roofline.workload_shares(cfg, rn.HARDWARE_PRESETS[hw_name], bpw, mfu, bw_eff, batch), hide_index=True,
             width="stretch")
st.caption(rn.hardware_caption(hw_name))
