"""Batch lab: how each phase's throughput grows with B, and where decode stops being memory-bound (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_sweeps
from ui.text import lab_text, sweep_numbers

BATCH_CHOICES = [1, 2, 4, 8, 16, 32, 64]

st.title("Batch lab — many riders, one bridge")
st.markdown(lab_text.BATCH_INTRO)
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)

store = worker_link.store()
result = store.labs.get(state.BATCH_RESULT)

cols = st.columns([3, 1, 1, 1])
sizes = sorted(cols[0].multiselect("Batch sizes B", BATCH_CHOICES, default=[1, 2, 4, 8, 16], key=state.BATCH_SIZES))
n_prompt = int(cols[1].number_input("Prompt tokens", 4, 512, 32, key=state.BATCH_PROMPT))
n_out = int(cols[2].number_input("Output tokens", 2, 64, 8, key=state.BATCH_OUTPUT))
rounds = int(cols[3].number_input("Rounds", 1, 9, 4, key=state.BATCH_ROUNDS, help=lab_text.ROUNDS_HELP))

lm = widgets.current_model()
if lm is None:
    st.stop()
if sizes:
    st.caption(sweep_numbers.batch_memory_caption(lm, sizes[-1], n_prompt, n_out))

row = st.container(horizontal=True)  # one row, each button as wide as its label
run = row.button("▶ Run batch sweep", type="primary", key=state.BATCH_RUN, disabled=not sizes or not labs_open)
row.button("■ Cancel", key=state.BATCH_CANCEL, help=lab_text.CANCEL_HELP, disabled=not labs_open)
if st.session_state.get(state.BATCH_CANCEL) and result is not None:
    result.cancelled = result.done < len(result.planned)  # the points measured so far stay

peaks = store.labs.setdefault(state.PEAKS, {}).get((lm.device, lm.dtype))
start = False
if run:
    refusal = sweep_numbers.batch_refusal(lm, sizes, n_prompt, n_out)  # refuse before running anything
    if refusal:
        st.error(refusal)
    start = refusal is None
if start and peaks is None:
    peaks = job_progress.lab_run(state.PEAKS_JOB, True, "hardware.peaks",
                                label="Measuring this machine's copy bandwidth and matmul FLOP/s…")
    store.labs[state.PEAKS][(lm.device, lm.dtype)] = peaks
if start:
    store.labs.pop(state.BATCH_RESULT, None)


def keep(partial):
    store.labs[state.BATCH_RESULT] = partial  # kept point by point: a Cancel keeps what was measured
    return sweep_numbers.batch_progress(partial)


final = job_progress.lab_run(state.BATCH_JOB, start, "sweeps.batch_sizes", (sizes, n_prompt, n_out, rounds, True),
                            cancel_key=state.BATCH_CANCEL, on_payload=keep,
                            label=f"Measuring {len(sizes)} batch sizes on {lm.name}…")
if final is not None:
    store.labs[state.BATCH_RESULT] = final
result = store.labs.get(state.BATCH_RESULT)

st.caption(fig_sweeps.sweep_status(result))
if result is not None and result.points:
    points, apart = result.points, result.separate
    if banner := lab_text.busy_banner(result.cpu_wait):
        st.warning(banner)
    cross = sweep_numbers.batch_crossover(lm, points, peaks, n_prompt, n_out)
    theme_toggle.plotly_chart(fig_sweeps.batch_throughput_figure(points, apart))
    st.markdown(lab_text.batch_findings(points))
    st.caption(f"{lab_text.path_note(points, apart)} {lab_text.cpu_wait_words(result.cpu_wait)}")
    theme_toggle.plotly_chart(fig_sweeps.batch_latency_figure(points, cross.measured, cross.predicted, separate=apart))
    st.markdown(lab_text.batch_explanation(cross.measured, cross.predicted, cross.ridge, cross.tried_max, cross.dtype_bytes))
    st.dataframe(fig_sweeps.sweep_table(points, apart), hide_index=True, width="stretch")
    st.download_button("Download CSV", fig_sweeps.sweep_csv(points, apart), file_name="two_bends_batch_sweep.csv",
                       mime="text/csv", key=state.BATCH_CSV)
elif labs_open:
    st.info("Pick batch sizes and press **Run batch sweep**: every size runs once per round, so the time grows "
            "with the rounds; a progress bar shows each run as it ends.")
