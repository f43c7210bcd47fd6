"""Traffic lab: one arrival sequence, several scheduling policies, TTFT/ITL, goodput under SLOs (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle, widgets
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_traffic
from ui.text import traffic_text as tt

st.title("Traffic lab — many convoys, one road")
st.markdown(tt.INTRO)
labs_open = job_progress.lab_notice()  # in a room: why this session may not start lab measurements (its buttons off)
store = worker_link.store()
ss = st.session_state


def use_preset() -> None:
    ss.update(tt.preset_inputs(ss[state.TRAFFIC_PRESET]))


for key, value in tt.defaults().items():
    ss.setdefault(key, value)
c = st.columns(4)
name = c[0].selectbox("Workload", tt.PRESET_NAMES, key=state.TRAFFIC_PRESET, on_change=use_preset,
                      help="summarisation: long in, short out; chat; code: short in, long out")
burst = c[1].toggle("Burst: all at once", key=state.TRAFFIC_BURST)
rate = c[2].number_input("Requests / s", 0.1, 100.0, step=0.5, key=state.TRAFFIC_RATE, disabled=burst)
burstiness = c[3].number_input("Burstiness (1 = Poisson)", 0.1, 10.0, step=0.1, key=state.TRAFFIC_BURSTINESS,
                               disabled=burst, help="vLLM's --burstiness: below 1 burstier, above 1 steadier")
c = st.columns(6)
n_prompt = c[0].number_input("Prompt tokens (mean)", 1, 4096, key=state.TRAFFIC_PROMPT)
prompt_spread = c[1].number_input("Prompt spread", 0.0, 2.0, step=0.1, key=state.TRAFFIC_PROMPT_SPREAD)
n_out = c[2].number_input("Output tokens (mean)", 1, 1024, key=state.TRAFFIC_OUTPUT)
out_spread = c[3].number_input("Output spread", 0.0, 2.0, step=0.1, key=state.TRAFFIC_OUTPUT_SPREAD)
n_req = c[4].number_input("Requests", 1, 256, key=state.TRAFFIC_REQUESTS)
seed = c[5].number_input("Seed", 0, 10_000, key=state.TRAFFIC_SEED)
policies = st.multiselect("Policies to compare (same arrivals)", list(tt.POLICY_CHOICES), key=state.TRAFFIC_POLICIES,
                          format_func=tt.POLICY_CHOICES.get)
c = st.columns(3)
slo_ttft = c[0].number_input("SLO: TTFT ≤ ms", 1.0, 600_000.0, key=state.TRAFFIC_SLO_TTFT)
slo_tpot = c[1].number_input("SLO: TPOT ≤ ms", 1.0, 60_000.0, key=state.TRAFFIC_SLO_TPOT)
chunk = c[2].number_input("Chunk budget (tokens/step)", 1, 8192, key=state.TRAFFIC_CHUNK, disabled="chunked" not in policies,
                          help="chunked prefill: prompt tokens + decode tokens per engine step (vLLM's --max-num-batched-tokens)")

inputs = dict(burst=burst, rate=rate, burstiness=burstiness, prompt_tokens=n_prompt, prompt_spread=prompt_spread,
              output_tokens=n_out, output_spread=out_spread, num_requests=n_req)
problem = tt.check(name, policies, **inputs)
lm = widgets.current_model()
if lm is None:
    st.stop()
st.caption(tt.workload_caption(name, lm, **inputs) if problem is None else problem)

buttons = st.columns([1, 1, 4])
start = buttons[0].button("▶ Run traffic", type="primary", key=state.TRAFFIC_RUN, disabled=problem is not None or not labs_open)
buttons[1].button("■ Cancel", key=state.TRAFFIC_CANCEL, help=tt.CANCEL_HELP, disabled=not labs_open)
if start:
    store.labs.pop(state.TRAFFIC_RESULT, None)
    store.labs[state.TRAFFIC_WORKLOAD] = (tt.workload_from(name, **inputs), int(seed))
workload, run_seed = store.labs.get(state.TRAFFIC_WORKLOAD, (None, 0))
final = job_progress.lab_run(state.TRAFFIC_JOB, start, "traffic.run", (workload, list(policies)),
                            {"seed": run_seed, "max_num_batched_tokens": int(chunk)},
                            cancel_key=state.TRAFFIC_CANCEL, label=f"Replaying {n_req} requests on {lm.name}…")
if final is not None:
    store.labs[state.TRAFFIC_RESULT] = final
result = store.labs.get(state.TRAFFIC_RESULT)

if result is None:
    if labs_open:
        st.info("Pick a workload, the policies to compare and your SLOs, then press **Run traffic**.")
    st.stop()
slo = tt.slo_of(slo_ttft, slo_tpot)
st.markdown(tt.findings(result, slo))
st.dataframe(tt.policy_table(result, slo), hide_index=True, width="stretch")
c = st.columns(2)
with c[0]:
    theme_toggle.plotly_chart(fig_traffic.ttft_figure(result, slo))
with c[1]:
    theme_toggle.plotly_chart(fig_traffic.itl_figure(result, slo))
theme_toggle.plotly_chart(fig_traffic.goodput_figure(result, slo))
for run in tt.handover_runs(result):
    st.subheader("The KV cart crossing (disaggregated)")
    st.caption(tt.HANDOVER_HELP)
    st.dataframe(tt.handover_table(run), hide_index=True, width="stretch")
if ran := tt.ran_policies(result):
    shown = st.radio("Step timeline of", ran, key=state.TRAFFIC_TIMELINE, horizontal=True, format_func=tt.POLICY_CHOICES.get)
    run = tt.policy_run(result, shown)
    st.caption(tt.timeline_help(run))
    theme_toggle.plotly_chart(fig_traffic.timeline_figure(run))
