"""Batch lab: prefill saturates, decode throughput grows with B until the crossover (layout only)."""
import streamlit as st

from engine.core.config import dtype_bytes as bytes_of
from engine.errors import EngineError
from engine.labs import sweeps
from engine.perfmodel import roofline
from ui.controls import state, widgets
from ui.engine_link import worker_link
from ui.figures import fig_sweeps
from ui.text import lab_text

BATCH_CHOICES = [1, 2, 4, 8, 16, 32, 64]
GIB = 2**30

st.title("Batch lab — many riders, one bridge")
st.markdown(lab_text.BATCH_INTRO)

store = worker_link.store()
result = store.labs.get(state.BATCH_RESULT)

cols = st.columns([3, 1, 1])
sizes = sorted(cols[0].multiselect("Batch sizes B", BATCH_CHOICES, default=[1, 2, 4, 8, 16], key=state.BATCH_SIZES))
n_prompt = int(cols[1].number_input("Prompt tokens", 4, 512, 32, key=state.BATCH_PROMPT))
n_out = int(cols[2].number_input("Output tokens", 2, 64, 8, key=state.BATCH_OUTPUT))

lm = widgets.current_model()
if lm is None:
    st.stop()
dtype_bytes = bytes_of(lm.dtype)
if sizes:
    est = sweeps.estimate_batch_memory(lm, sizes[-1], n_prompt, n_out)
    free = f"{est.available / GIB:.1f} GiB free now" if est.available is not None else "free memory unknown"
    st.caption(f"Memory estimate for B = {sizes[-1]}: weights {est.weights / GIB:.2f} GiB (already loaded) + KV cache "
               f"{est.kv_cache / GIB:.3f} + activations {est.activations / GIB:.3f} + logits {est.logits / GIB:.3f} GiB; "
               f"{free}. Sizes that would not fit are refused before anything runs.")

buttons = st.columns([1, 1, 4])
run = buttons[0].button("▶ Run batch sweep", type="primary", key=state.BATCH_RUN, disabled=not sizes)
buttons[1].button("■ Cancel", key=state.BATCH_CANCEL, help=lab_text.CANCEL_HELP)
if st.session_state.get(state.BATCH_CANCEL) and result is not None:
    result.cancelled = result.done < len(result.planned)  # the points measured so far stay

peaks = store.labs.setdefault(state.PEAKS, {}).get((lm.device, lm.dtype))
start = False
if run:
    try:
        for b in sizes:  # refuse before running anything
            sweeps.check_batch_memory(lm, b, n_prompt, n_out)
        start = True
    except EngineError as exc:
        st.error(str(exc))
if start and peaks is None:
    peaks = worker_link.lab_run(state.PEAKS_JOB, True, "engine.labs.hardware:peaks_of", callback=None,
                            label="Measuring this machine's copy bandwidth and matmul FLOP/s…")
    store.labs[state.PEAKS][(lm.device, lm.dtype)] = peaks
if start:
    store.labs.pop(state.BATCH_RESULT, None)


def keep(partial: sweeps.SweepResult):
    store.labs[state.BATCH_RESULT] = partial  # kept point by point: a Cancel keeps what was measured
    p = partial.points[-1]
    return f"B = {p.batch_size}: step {p.itl_p50_s * 1e3:.0f} ms", partial.done / len(partial.planned)


final = worker_link.lab_run(state.BATCH_JOB, start, "engine.labs.sweeps:sweep_batch_sizes", (sizes, n_prompt, n_out),
                        callback="on_point", cancel_key=state.BATCH_CANCEL, on_payload=keep,
                        label=f"Measuring {len(sizes)} batch sizes on {lm.name}…")
if final is not None:
    store.labs[state.BATCH_RESULT] = final
result = store.labs.get(state.BATCH_RESULT)

st.caption(fig_sweeps.sweep_status(result))
if result is not None and result.points:
    points = result.points
    measured = sweeps.measured_crossover(points)
    ridge = peaks.matmul_flops_per_s / peaks.copy_bytes_per_s if peaks is not None else None
    predicted = (roofline.predicted_crossover_batch(lm.config, n_prompt + n_out // 2, ridge, dtype_bytes, dtype_bytes)
                 if ridge is not None else None)
    st.plotly_chart(fig_sweeps.batch_throughput_figure(points), width="stretch", theme=None)
    st.plotly_chart(fig_sweeps.batch_latency_figure(points, measured, predicted), width="stretch", theme=None)
    st.markdown(lab_text.batch_explanation(measured, predicted, ridge, max(p.batch_size for p in points), dtype_bytes))
    st.dataframe(fig_sweeps.sweep_table(points), hide_index=True, width="stretch")
    st.download_button("Download CSV", fig_sweeps.sweep_csv(points), file_name="two_bends_batch_sweep.csv",
                       mime="text/csv", key=state.BATCH_CSV)
else:
    st.info("Pick batch sizes and press **Run batch sweep** (B = 1…16 takes a few seconds with SmolLM2 on CPU).")
