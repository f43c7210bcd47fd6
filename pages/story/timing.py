"""Timing — the dispatcher's ledger: each token's latency, cumulative time, vLLM's metrics, runs compared."""
import streamlit as st

from ui import state
from ui.controls import demo_panel, presenter
from ui.demo import report
from ui.engine_link import server_measurement, worker_link
from ui.figures import fig_timing
from ui.text import run_numbers, runs

st.title("The dispatcher's ledger")
demo_panel.recorded_banner()
if not presenter.active():
    st.markdown(
        "Old Qin times each segment of the road on its own. Here every token is a line in the ledger: the first one "
        "after the whole prompt has crossed the valley (**TTFT**), every later one after a single crossing of the "
        "bridge (**ITL**). While a run is in progress, the live chart above shows the steps as they happen."
    )
with st.expander("Definitions (the same as vLLM's benchmarks)", expanded=False):
    for name, definition in runs.DEFINITIONS.items():
        st.markdown(f"- **{name}** — {definition}")
    st.markdown("Warm-up (one small run before timing) and the attention capture (a replay after timing, for the "
                "Prefill and Decode pages) are measured but **excluded** from every number here.")
    st.markdown(run_numbers.PAGE_VS_CLI)

trace = worker_link.store().last_trace
if trace is None:
    presenter.press_run(": the ledger fills in as the model generates.")
    st.stop()

summary = run_numbers.summary(trace)
st.subheader(f"Last run: {trace.n_prompt} prompt tokens → {trace.n_output} output tokens")
st.caption(run_numbers.provenance(trace, worker_link.store().recorded or ""))
if trace.source == "server":
    st.caption(f"{trace.model} · {server_measurement.outside_caption(trace)}")
else:
    st.caption(f"{trace.model} · {trace.device} ({trace.env.get('device_name', '?')}) · {trace.dtype} · "
               f"kernels: {trace.env.get('kernels', 'plain')} · "
               f"{trace.env.get('threads', '?')} threads · torch {trace.env.get('torch', '?')} · "
               f"warm-up {trace.warmup_seconds:.3f} s and attention capture {trace.capture_seconds:.3f} s excluded · "
               f"stopped by: {trace.stop_reason}")

PRESENT_HEIGHT = 440  # px: below the title and the run's two captions, both charts fit a 1280x720 projector
itl_col, cum_col = st.columns(2, gap="large")
with itl_col:
    # a run not measured here: its charts say so under their titles (presenting: the page's banner, big, says it)
    where = "" if presenter.active() else run_numbers.chart_note(trace)
    presenter.chart(fig_timing.itl_figure(trace.prefill_seconds, [s.seconds for s in trace.steps], where=where,
                                          stall_s=[s.stall_seconds for s in trace.steps],
                                          riders=[s.riders for s in trace.steps]), key="timing_itl", name="itl",
                  present_height=PRESENT_HEIGHT)
with cum_col:
    presenter.chart(fig_timing.cumulative_figure(trace, where=where), key="timing_cumulative", name="cumulative_time",
                  present_height=PRESENT_HEIGHT)

if sharing := run_numbers.sharing_note(trace):
    st.markdown(sharing)

table_col, steps_col = st.columns([3, 2], gap="large")
with table_col:
    st.markdown("**Metrics of the last run**")
    # a static table: the definitions wrap instead of being cut off at the column's edge
    st.table(runs.metrics_table(summary, server=trace.source == "server").style.format({"value": "{:,.2f}"})
             .hide(axis="index"))
    st.markdown(run_numbers.cpu_wait_note(trace, quiet=bool(trace.settings.get("quiet_timing"))))
with steps_col:
    st.markdown("**Token by token**")
    steps = runs.steps_table(trace)
    st.dataframe(steps, hide_index=True, width="stretch", height=320,
                 column_config={"latency (ms)": st.column_config.NumberColumn(format="%.2f")})
    st.download_button("Download this run's steps (CSV)", runs.to_csv(steps), file_name="two_bends_steps.csv",
                       mime="text/csv", key=state.TIMING_STEPS_CSV)
    demo_panel.trace_download(trace, state.TIMING_TRACE_JSON, "Download this run (Trace JSON)")
    st.download_button("Download the run report (HTML)", data=lambda: report.run_report(trace),
                       file_name=demo_panel.file_name(trace).replace(".json", "-report.html"), mime="text/html",
                       key=state.TIMING_REPORT, on_click="ignore", icon=":material/description:",
                       help="One self-contained page: key figures, phase split, ITL chart, diagnosis; opens offline.")
    st.caption("Every chart saves itself as a PNG: the camera icon above its top-right corner.")

st.divider()
history = worker_link.store().history
st.subheader(f"Every run of this session ({len(history)})")
st.markdown("Change the prompt length or the output length in the sidebar and press Run again: long prompts grow "
            "the orange (valley) part, long answers grow the blue (bridge) part.")
table = runs.runs_table(history)
presenter.chart(fig_timing.runs_figure(table), key="timing_runs", name="runs_compared")
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.1f") for c in table.columns if "(ms)" in c or "/s" in c}
             | {"prefill share": st.column_config.NumberColumn(format="percent")})
st.markdown("**Run-to-run spread** (repeated runs of the same request: median and range)")
spread = runs.spread_table(table)
if not spread.empty:
    st.dataframe(spread, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.1f") for c in spread.columns if "(ms)" in c})
st.markdown(runs.spread_note(spread))
left, middle, right = st.columns(3)
left.download_button("Download all runs (CSV)", runs.to_csv(table), file_name="two_bends_runs.csv", mime="text/csv",
                     key=state.TIMING_RUNS_CSV)
if len(history) > 1:
    middle.download_button(f"Download the handout: {len(history)} runs side by side (HTML)",
                           data=lambda: report.session_report(history), key=state.TIMING_HANDOUT,
                           file_name=f"two-bends-handout-{len(history)}-runs.html", mime="text/html", on_click="ignore",
                           icon=":material/description:",
                           help="One self-contained page for students: every run's numbers and verdict in columns, "
                                "the phases compared, each run's token chart; opens offline.")
if right.button("Clear the run history", key=state.TIMING_CLEAR):
    worker_link.store().history = history[-1:]
    st.rerun()
