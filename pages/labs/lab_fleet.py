"""The fleet planner: the cheapest fleet meeting the SLOs, and which stage eats its money (layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle
from ui.figures import fig_fleet
from ui.text import fleet_text as ft

st.title("The fleet planner — which stage eats the money at scale")
st.markdown(ft.INTRO)
st.info(ft.HONESTY, icon=":material/fact_check:")

cal = ft.load_calibration()
with st.expander("Measured and fitted on this machine: the step model and its check against the real engine"):
    st.caption(cal.note)
    if cal.fit is not None:
        m = cal.fit
        st.markdown(f"**Fitted step time** = {m.fixed_s * 1e3:.2f} ms + {m.per_token_s * 1e6:.1f} µs per token "
                    f"computed + {m.per_kv_byte_s * 1e12:.2f} ps per KV byte read ({m.source}).")
        theme_toggle.plotly_chart(fig_fleet.fit_figure(cal.residuals), width="stretch", theme=None)
        st.dataframe(ft.check_table(cal), hide_index=True)
        misses = ft.check_lines(cal)
        if misses:
            st.warning("Where the simulator is **outside 20 %** of the measured engine (trust it less there):\n\n- "
                       + "\n- ".join(misses))
        else:
            st.success("The simulator is within 20 % of the measured engine on every workload and metric.")
    eff = cal.efficiency
    st.markdown(f"**Efficiencies carried to other cards:** compute {eff.compute:.0%} of peak FLOP/s, KV reads "
                f"{eff.bandwidth:.0%} and weight reads {eff.weights_bandwidth:.0%} of peak bandwidth.")

st.subheader("The traffic and its objectives")
cols = st.columns(4)
kind = cols[0].selectbox("Workload (the fable's kinds of work)", [*ft.WORKLOADS, "custom"], index=1,
                         key=state.FLEET_WORKLOAD)
rate = cols[1].number_input("Requests per second", 0.1, 100000.0, 500.0, 50.0, key=state.FLEET_RATE)
n = cols[2].number_input("Requests simulated", 50, 20000, 2000, 250, key=state.FLEET_REQUESTS)
if kind == "custom":
    prompt_mean = cols[3].number_input("Prompt tokens (mean)", 1, 32768, 256, 32, key=state.FLEET_PROMPT)
    output_mean = cols[3].number_input("Output tokens (mean)", 0, 32768, 128, 32, key=state.FLEET_OUTPUT)
    workload = ft.workload_of(kind, prompt_mean, output_mean)
else:
    workload = ft.workload_of(kind)
st.caption(ft.workload_caption(workload))
cols = st.columns(2)
ttft_ms = cols[0].number_input("TTFT objective (ms)", 0.0, 60000.0, 500.0, 50.0, key=state.FLEET_TTFT)
tpot_ms = cols[1].number_input("TPOT objective (ms)", 0.0, 10000.0, 50.0, 5.0, key=state.FLEET_TPOT)

st.subheader("The cards and the policies")
cols = st.columns(3)
model_name = cols[0].selectbox("Model", list(ft.MODELS), index=list(ft.MODELS).index(ft.DEFAULT_MODEL),
                               key=state.FLEET_MODEL)
card = cols[1].selectbox("Card (spec sheet)", list(ft.HARDWARE), index=1, key=state.FLEET_CARD)
card_index = list(ft.HARDWARE).index(card)
price = cols[2].number_input("Price per card-hour", 0.0, 1000.0, ft.DEFAULT_PRICES.get(card, 1.0), 0.1,
                             key=f"{state.FLEET_PRICE}{card_index}")
policies = st.multiselect("Policies to plan", list(ft.POLICY_NAMES), default=list(ft.POLICY_NAMES),
                          format_func=ft.POLICY_NAMES.get, key=state.FLEET_POLICIES)
cols = st.columns(3)
max_batch = cols[0].number_input("Rows per card (max batch)", 1, 1024, 64, 8, key=state.FLEET_MAX_BATCH)
budget = cols[1].number_input("Chunked prefill: tokens per step", 1, 65536, 2048, 256, key=state.FLEET_BUDGET)
link = cols[2].number_input("Disaggregated: KV link (GB/s)", 0.0, 10000.0, 50.0, 10.0, key=state.FLEET_LINK)

if st.button("Plan the fleet", type="primary", key=state.FLEET_PLAN):
    st.session_state.pop(state.FLEET_ERROR, None)
    with st.spinner("Simulating fleets…"):
        outcome = ft.run_planner(cal, workload, rate, int(n), ttft_ms, tpot_ms, model_name, card, price, policies,
                                 int(max_batch), int(budget), link)
    st.session_state[state.FLEET_RESULT if isinstance(outcome, dict) else state.FLEET_ERROR] = outcome

if state.FLEET_ERROR in st.session_state:
    st.error(st.session_state[state.FLEET_ERROR])
result = st.session_state.get(state.FLEET_RESULT)
if result:
    st.caption(result["step_model"])
    st.dataframe(ft.plan_table(result["plans"]), hide_index=True)
    theme_toggle.plotly_chart(fig_fleet.money_figure(result["plans"], ft.POLICY_NAMES), width="stretch", theme=None)
    best = ft.cheapest(result["plans"])
    if best is None:
        st.warning("No fleet up to 256 cards met the objectives for 90 % of requests: loosen the SLOs or lower the "
                   "rate.")
    else:
        policy, p = best
        st.markdown(f"**Cheapest fleet meeting the SLOs:** {ft.POLICY_NAMES[policy]}, {ft.fleet_words(p)} — "
                    f"**{p.cost_per_million:.4g} per million tokens**.")
        st.markdown(ft.ledger_text(p, result["card"]))
