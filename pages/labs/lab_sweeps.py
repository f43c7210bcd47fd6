"""Sweep lab: TTFT against prompt length and decode cost against output length, measured live (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_sweeps
from ui.text import lab_text, sweep_numbers

PROMPT_CHOICES = [16, 32, 64, 128, 256, 512, 1024, 2048]
OUTPUT_CHOICES = [4, 8, 16, 32, 64, 128, 256]
KINDS = {"prompt": "Prompt-length sweep (TTFT)", "output": "Output-length sweep (decode)"}

st.title("Sweep lab — widen the valley, lengthen the bridge")
st.markdown(lab_text.SWEEP_INTRO)
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)

store = worker_link.store()
results: dict = store.labs.setdefault(state.SWEEP_RESULTS, {})  # {"prompt": SweepResult, "output": SweepResult}

kind = st.radio("Sweep", list(KINDS), format_func=KINDS.get, horizontal=True, key=state.SWEEP_KIND)
cols = st.columns([3, 1, 1])
rounds = int(cols[2].number_input("Rounds", 1, 9, 3, key=state.SWEEP_ROUNDS, help=lab_text.ROUNDS_HELP))
if kind == "prompt":
    lengths = cols[0].multiselect("Prompt lengths (tokens)", PROMPT_CHOICES, default=[16, 32, 64, 128, 256, 512],
                                  key=state.SWEEP_PROMPT_LENGTHS)
    fixed = cols[1].number_input("Output tokens per run", 2, 64, 8, key=state.SWEEP_FIXED_OUTPUT)
else:
    lengths = cols[0].multiselect("Output lengths (tokens)", OUTPUT_CHOICES, default=[8, 16, 32, 64],
                                  key=state.SWEEP_OUTPUT_LENGTHS)
    fixed = cols[1].number_input("Prompt tokens per run", 4, 1024, 32, key=state.SWEEP_FIXED_PROMPT)
lengths = sorted(lengths)

row = st.container(horizontal=True)  # one row, each button as wide as its label
run = row.button("▶ Run sweep", type="primary", key=state.SWEEP_RUN, disabled=not lengths or not labs_open)
row.button("■ Cancel", key=state.SWEEP_CANCEL, help=lab_text.CANCEL_HELP, disabled=not labs_open)

lm = widgets.current_model()
running_kind = store.labs.get(state.SWEEP_RUNNING)
if st.session_state.get(state.SWEEP_CANCEL) and running_kind in results:
    results[running_kind].cancelled = True  # the points measured so far stay
start = False
if run and lm is not None:
    args, refused = sweep_numbers.sweep_plan(lm, kind, lengths, int(fixed))
    for message in refused:
        st.warning(f"Skipped: {message}")
    if args is not None:
        args = (*args, rounds)
        start, running_kind = True, kind
        store.labs[state.SWEEP_RUNNING] = kind
        results.pop(kind, None)


def keep(partial):
    """Each measured point arrives as a snapshot, kept at once: a Cancel keeps what was measured."""
    results[running_kind] = partial
    return sweep_numbers.sweep_progress(partial)


job = "sweeps.prompt_lengths" if running_kind == "prompt" else "sweeps.output_lengths"
final = job_progress.lab_run(state.SWEEP_JOB, start, job, args if start else (), cancel_key=state.SWEEP_CANCEL,
                            on_payload=keep, label=f"Measuring on {lm.name if lm else ''}…")
if final is not None:
    results[running_kind] = final

result = results.get(kind)
st.caption(fig_sweeps.sweep_status(result))
if result is not None and result.points:
    points = result.points
    if banner := lab_text.busy_banner(result.cpu_wait):
        st.warning(banner)
    st.caption(lab_text.cpu_wait_words(result.cpu_wait))
    if kind == "prompt":
        fit = sweep_numbers.ttft_fit(points)
        theme_toggle.plotly_chart(fig_sweeps.ttft_figure(points, fit))
        st.markdown(sweep_numbers.fit_text(fit, lm.config if lm is not None else None))
    else:
        theme_toggle.plotly_chart(fig_sweeps.phase_split_figure(points, "output_tokens"))
    theme_toggle.plotly_chart(fig_sweeps.decode_latency_figure(points))
    if lm is not None:
        st.markdown(sweep_numbers.decode_context_note(lm, points))
    if kind == "prompt":
        theme_toggle.plotly_chart(fig_sweeps.phase_split_figure(points, "prompt_tokens"))
    st.dataframe(fig_sweeps.sweep_table(points), hide_index=True, width="stretch")
    st.download_button("Download CSV", fig_sweeps.sweep_csv(points), file_name=f"two_bends_{kind}_sweep.csv",
                       mime="text/csv", key=state.SWEEP_CSV)
elif lm is not None and labs_open:
    st.info("Pick the lengths and press **Run sweep**: every point runs once per round, so the time grows with "
            "the rounds; a progress bar shows each run as it ends.")
