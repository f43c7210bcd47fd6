"""Remedies lab: each remedy measured on this machine and labelled with the phase it helps (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_remedies as fr
from ui.text import remedy_text as rt

st.title("Remedies lab — a strategy for each segment")
st.markdown(f"Each remedy is measured here, now, on this machine: the baseline and the remedy run the same request. {rt.LESSON}")
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)

results: dict = worker_link.store().labs.setdefault(state.REMEDY_RESULTS, {})  # the latest measurement of each
history: dict = worker_link.store().labs.setdefault(state.REMEDY_HISTORY, {})  # every measurement kept for its verdict
lm = widgets.current_model()
top = st.columns([1, 1, 3])
n_tokens = int(top[0].number_input("Output tokens per request", 4, 128, 24, key=state.REMEDY_TOKENS))
top[1].button("■ Cancel", key=state.REMEDY_CANCEL, help="Stops the measurement that is running; earlier results stay.",
               disabled=not labs_open)


def measure(key: str, job: str, *args, **kwargs) -> None:
    """A Measure button; on click, the lab job (a remedy of engine/labs/remedies.py) runs with *args, **kwargs in
    the engine worker with a progress bar (Cancel stops it there), and the result is kept in the session."""
    start = st.button("▶ Measure", key=state.REMEDY_MEASURE + key, type="primary", disabled=lm is None or not labs_open)
    result = job_progress.lab_run(state.REMEDY_JOB + key, start, job, args, kwargs,
                                 cancel_key=state.REMEDY_CANCEL, label=f"Measuring on {lm.name if lm else ''}…")
    if result is not None:
        results[key] = result
        rt.keep(history, key, result)


def header(key: str) -> None:
    st.markdown(f"**{rt.TITLES[key]}** &nbsp; {rt.badge(key)} &nbsp; {rt.HELPS[key][1]}")


tabs = st.tabs([rt.TAB_LABELS[k] for k in ("kv_cache", "speculative", "prefix", "dtype", "int8", "kernels", "overhead", "matrix")])

with tabs[0]:
    header("kv_cache")
    measure("kv_cache", "remedies.kv_cache", rt.OPEN_PROMPT, n_tokens)
    if r := results.get("kv_cache"):
        theme_toggle.plotly_chart(fr.kv_cache_figure(r))
        st.markdown(rt.kv_cache_summary(r, history.get("kv_cache")))

with tabs[1]:
    header("speculative")
    c = st.columns([2, 2, 1])
    copy_prompt = c[0].text_area("Prompt whose answer copies from it", rt.COPY_PROMPT, height=150, key=state.REMEDY_COPY_PROMPT)
    open_prompt = c[1].text_area("Open-ended prompt", rt.OPEN_PROMPT, height=150, key=state.REMEDY_OPEN_PROMPT)
    k = int(c[2].number_input("Draft tokens k", 1, 10, 4, key=state.REMEDY_DRAFT_K))
    st.caption("Drafts: the k tokens that followed the latest earlier match of the last 3 (then 2, then 1) tokens (Saxena 2023). "
               "All drafts are checked in one forward pass; the longest prefix equal to greedy is kept (Leviathan et al. 2023).")
    prompts = {"copy / summarise": copy_prompt, "open-ended": open_prompt}
    measure("speculative", "remedies.speculative", prompts, n_tokens, k)
    if r := results.get("speculative"):
        theme_toggle.plotly_chart(fr.speculative_figure(r))
        st.markdown(rt.speculative_summary(r, history.get("speculative")))

with tabs[2]:
    header("prefix")
    c = st.columns(2)
    turn1 = c[0].text_input("Turn 1 (user)", rt.TURN1, key=state.REMEDY_TURN1)
    turn2 = c[1].text_input("Turn 2 (user)", rt.TURN2, key=state.REMEDY_TURN2)
    measure("prefix", "remedies.prefix_cache", turn1, turn2, answer_tokens=n_tokens)
    if r := results.get("prefix"):
        theme_toggle.plotly_chart(fr.phase_pair_figure([r.full, r.reused], "Turn 2: from scratch vs reusing turn 1's cache (measured)"))
        st.markdown(rt.prefix_summary(r, history.get("prefix")))

with tabs[3]:
    header("dtype")
    st.markdown(rt.DTYPE_NOTE)
    measure("dtype", "remedies.dtypes", ("float32", "bfloat16"), rt.OPEN_PROMPT, n_tokens)
    if r := results.get("dtype"):
        theme_toggle.plotly_chart(fr.phase_pair_figure(r, "float32 vs bfloat16 on this device (measured)"))
        st.markdown(rt.phase_rows_summary(r, history.get("dtype"), "dtype"))

with tabs[4]:
    header("int8")
    measure("int8", "remedies.int8", rt.OPEN_PROMPT, n_tokens)
    if r := results.get("int8"):
        theme_toggle.plotly_chart(fr.phase_pair_figure(r.rows, "Weights in float vs int8 (measured)"))
        st.markdown(rt.int8_summary(r, history.get("int8")))
    st.caption(rt.LLAMA_CPP_CITATION)

with tabs[5]:
    header("kernels")
    measure("kernels", "remedies.kernels", rt.OPEN_PROMPT, n_tokens)
    if r := results.get("kernels"):
        theme_toggle.plotly_chart(fr.phase_pair_figure(r.rows, "The same weights: nn.Linear vs the fast kernels (measured)"))
        st.markdown(rt.kernels_summary(r, history.get("kernels")))

with tabs[6]:
    header("overhead")
    measure("overhead", "remedies.overhead")
    if r := results.get("overhead"):
        theme_toggle.plotly_chart(fr.overhead_figure(r))
        st.markdown(rt.overhead_summary(r))
    if lm is None or not lm.device.startswith("cuda"):
        st.info(rt.CUDA_NOTE)
    else:
        st.markdown("**CUDA graphs** (measured): the same request, decode steps launched one kernel at a time vs "
                    "replayed from one captured graph.")
        measure("cuda_graphs", "remedies.cuda_graphs", rt.OPEN_PROMPT, n_tokens)
        if r := results.get("cuda_graphs"):
            theme_toggle.plotly_chart(fr.phase_pair_figure([r.eager, r.graphed], "Eager vs CUDA-graph decode (measured)"))
            st.caption(f"Same tokens: {r.same_tokens}")

with tabs[7]:
    st.markdown("Rows: the remedies measured so far in this session; columns: their measured effect on each phase. "
                "Green: faster in every run, by more than the runs' spread; red: slower the same way; grey: no "
                "verdict (too few runs, or the runs disagree). A remedy aimed at one segment may show no gain on the "
                "other (bfloat16 and better kernels can move both): budget spent there buys nothing. The Budget lab "
                "crosses them on purpose: a valley remedy "
                "on a bridge-heavy request and bridge remedies on a valley-heavy one.")
    theme_toggle.plotly_chart(fr.indicator_matrix_figure(history))
    table = fr.effects_table(history)
    if not table.empty:
        st.dataframe(table.style.format({"TTFT speed-up": "×{:.2f}", "TPOT speed-up": "×{:.2f}",
                                         "TTFT runs apart": "{:.0%}", "TPOT runs apart": "{:.0%}"}, na_rep="—"),
                     hide_index=True)
    st.caption(f"Each cell: the median over every run of the last {rt.HISTORY_KEEP} (at most) measurements of that "
               f"remedy in this session, on this machine. {rt.NOISE_NOTE}")
    st.markdown(f"**{rt.LESSON}**")
