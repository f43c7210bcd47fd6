"""Where the time goes: torch.profiler on one prefill and on decode steps, grouped by kind of work (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_profile
from ui.text import remedy_text as rt

st.title("Where the time goes — GEMM in the valley, GEMV on the bridge")
st.markdown(rt.PROFILE_INTRO)
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)

lm = widgets.current_model()
cols = st.columns([2, 1, 3])
n_prompt = cols[0].select_slider("Prompt tokens to prefill", [32, 64, 128, 256, 512], value=256, key=state.PROFILE_TOKENS)
start = cols[1].button("▶ Profile", type="primary", key=state.PROFILE_RUN, disabled=lm is None or not labs_open)
store = worker_link.store()
profiled = job_progress.lab_run(state.PROFILE_JOB, start, "profiling.phases", (int(n_prompt),),
                               label=f"Profiling {lm.name if lm else ''}…")
if profiled is not None:
    store.labs[state.PROFILE_RESULT] = profiled

result = store.labs.get(state.PROFILE_RESULT)
if result is None:
    st.info("Press **Profile** to record one prefill and a few decode steps of the sidebar's model.")
else:
    st.markdown(rt.profile_summary(result))
    left, right = st.columns(2)
    theme_toggle.plotly_chart(fig_profile.kinds_figure(result), left)
    theme_toggle.plotly_chart(fig_profile.parts_figure(result), right)
    st.markdown("**Milliseconds per phase** (prefill: one pass over the prompt; decode: one step, averaged):")
    st.dataframe(fig_profile.times_table(result), hide_index=True)
    tab_p, tab_d = st.tabs(["Top operators — prefill", "Top operators — decode"])
    tab_p.dataframe(fig_profile.top_ops_table(result.prefill), hide_index=True, width="stretch")
    tab_d.dataframe(fig_profile.top_ops_table(result.decode), hide_index=True, width="stretch")
    st.caption(f"{result.model} on {result.device} ({result.dtype}). Kinds from operator names and recorded input shapes "
               "(a matmul whose activation has one row is a GEMV); parts from forward hooks around attention, MLP and LM head.")
