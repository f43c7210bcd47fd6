"""Old Qin's budget: split a speed-up budget between the valley and the bridge, see Amdahl's verdict (layout only)."""
import streamlit as st

from ui import state
from ui.controls import presenter, theme_toggle
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_cards, fig_remedies, fig_roofline
from ui.text import card_numbers as cn
from ui.text import crossed_numbers, lab_text
from ui.text import roofline_numbers as rn

SOURCES = {
    "fable": "The fable (valley = 20% of the journey)",
    "measured": "My last measured run",
    "preset": "A workload preset on spec-sheet hardware (estimate)",
    "custom": "Set the share myself",
}

st.title("Old Qin's budget — which segment gets the money?")
st.markdown(lab_text.BUDGET_INTRO)


def _set_speedups(prefill: float, decode: float) -> None:
    st.session_state[state.BUDGET_PREFILL_SPEEDUP] = prefill
    st.session_state[state.BUDGET_DECODE_SPEEDUP] = decode


source = st.radio("Where the prefill share comes from", list(SOURCES), format_func=SOURCES.get, key=state.BUDGET_SOURCE)
share, share_note = rn.FABLE_SHARE, rn.FABLE_NOTE
if source == "measured":
    measured = rn.measured_share(worker_link.store().last_trace)
    if measured is None:
        presenter.press_run(" on any page (no run yet), or use the fable's numbers.")
    else:
        share, share_note = measured
elif source == "preset":
    cols = st.columns(3)
    hw_name = cols[0].selectbox("Hardware", list(rn.HARDWARE_PRESETS), index=1, key=state.BUDGET_HARDWARE)
    wl_name = cols[1].selectbox("Workload", list(rn.WORKLOAD_PRESETS), key=state.BUDGET_WORKLOAD)
    model_name = st.session_state.get(state.ROOF_MODEL) or "Llama-2 7B (MHA, 32 KV heads)"
    cols[2].caption(f"Model: **{model_name}** (change it on the Roofline page), bf16 weights, batch 1.")
    share, share_note = rn.preset_share(model_name, hw_name, wl_name)
elif source == "custom":
    share = st.slider("Prefill share of the journey", 0.0, 1.0, 0.2, 0.01, key=state.BUDGET_SHARE)
    share_note = "set by hand"
st.markdown(f"**Prefill share p = {share:.1%}** — {share_note}.")

st.markdown("**Spend the budget:**")
preset_cols = st.columns(len(rn.FABLE_SCENARIOS) + 1)
for i, (name, (sp, sd)) in enumerate(rn.FABLE_SCENARIOS.items()):
    preset_cols[i].button(name, key=f"{state.BUDGET_FABLE}_{i}", on_click=_set_speedups, args=(sp, round(sd, 2)))
preset_cols[-1].button("Reset (×1, ×1)", key=f"{state.BUDGET_FABLE}_reset", on_click=_set_speedups, args=(1.0, 1.0))
st.session_state.setdefault(state.BUDGET_PREFILL_SPEEDUP, 2.0)  # the fable's first budget: valley ×2 only
st.session_state.setdefault(state.BUDGET_DECODE_SPEEDUP, 1.0)
cols = st.columns(2)
s_p = cols[0].slider("Valley (prefill) speed-up ×", 1.0, 10.0, step=0.1, key=state.BUDGET_PREFILL_SPEEDUP)
s_d = cols[1].slider("Bridge (decode) speed-up ×", 1.0, 10.0, step=0.1, key=state.BUDGET_DECODE_SPEEDUP)

result = rn.amdahl(share, s_p, s_d)
m = st.columns(3)
m[0].metric("End-to-end time saved", f"{result.saving:.1%}")
m[1].metric("End-to-end speed-up", f"{result.speedup:.2f}×")
m[2].metric("Best possible from the valley alone", f"{result.limit_if_only_prefill:.2f}×")
theme_toggle.plotly_chart(fig_roofline.budget_figure(result))
st.markdown(lab_text.budget_text(result))
if source == "fable":
    st.markdown(lab_text.fable_text(rn.fable()))
theme_toggle.plotly_chart(fig_roofline.budget_curve(share))

st.divider()
st.subheader("The indicator lights as an experiment: each remedy on both kinds of request, measured here")
st.markdown(crossed_numbers.INTRO)
if job_progress.lab_notice():
    row = st.container(horizontal=True)
    rounds = int(row.number_input("Rounds", 1, 9, 3, key=state.CROSSED_ROUNDS, help=lab_text.ROUNDS_HELP))
    start = row.button("▶ Measure the crossed remedies", type="primary", key=state.CROSSED_RUN)
    row.button("■ Cancel", key=state.CROSSED_CANCEL, help=lab_text.CANCEL_HELP)
    measured = job_progress.lab_run(state.CROSSED_JOB, start, "remedies.crossed", (rounds,), cancel_key=state.CROSSED_CANCEL,
                                   label="Measuring each remedy on a valley-heavy and a bridge-heavy request…")
    if measured is not None:
        worker_link.store().labs[state.CROSSED_RESULT] = measured
crossed = worker_link.store().labs.get(state.CROSSED_RESULT)
if crossed is not None:
    theme_toggle.plotly_chart(fig_remedies.crossed_figure(crossed))
    st.markdown(crossed_numbers.story(crossed))
    st.dataframe(crossed_numbers.table(crossed), hide_index=True, width="stretch")

st.subheader("H100 → H200: the same FLOP/s, 1.43× the bandwidth (spec sheets; the speed-ups: card-model estimates)")
comparison = cn.compare_cards(cn.COMPARISON_MODEL)
theme_toggle.plotly_chart(fig_cards.comparison_figure(comparison))
st.markdown(cn.comparison_words(comparison))
