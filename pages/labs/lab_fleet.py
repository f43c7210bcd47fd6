"""The fleet planner: the cheapest fleet meeting the SLOs, which stage eats its money, which card for which stage
(layout only)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle
from ui.engine_link import job_progress, worker_link
from ui.figures import fig_fleet
from ui.text import card_numbers as cn
from ui.text import fleet_text as ft

st.title("The fleet planner — which stage eats the money at scale")
st.markdown(ft.INTRO)
st.info(ft.HONESTY, icon=":material/fact_check:")

store = worker_link.store()
measured = store.labs.get(state.PEAKS, {})
peaks = next(iter(measured.values()), None)  # this machine's peaks, measured in this session (any model's shapes)
labs_open = worker_link.lab_refusal() is None  # in a room: only where this session may start lab measurements
if peaks is None and st.button("Measure this machine's peaks (adds it as a card)", key=state.FLEET_PEAKS_MEASURE,
                               disabled=not labs_open, help=worker_link.lab_refusal()):
    peaks = job_progress.lab_run(state.FLEET_PEAKS_JOB, True, "hardware.peaks",
                                label="Measuring this machine's peaks…")
    if peaks is not None:
        store.labs.setdefault(state.PEAKS, {})[(peaks.device, peaks.dtype)] = peaks
run = store.last_trace  # the last run, where measured here on the peaks' device and format: the card takes its MFU, MBU
run = run if cn.run_against_peaks(run, peaks) else None
cards = list(cn.cards_with(peaks, run))

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
default_card = cards.index("NVIDIA H100 SXM")
card = cols[1].selectbox("Cards (the prefill cards of a split fleet)", cards, index=default_card, key=state.FLEET_CARD)
price = cols[2].number_input("Price per card-hour (an example: set yours)", 0.0, 1000.0, ft.example_price(card), 0.1,
                             key=f"{state.FLEET_PRICE}{cards.index(card)}")
cols = st.columns(3)
decode_card = cols[1].selectbox("Decode cards (split fleets only)", [ft.SAME, *cards], key=state.FLEET_DECODE_CARD)
decode_price = None
if decode_card != ft.SAME:
    decode_price = cols[2].number_input("Their price per card-hour", 0.0, 1000.0, ft.example_price(decode_card), 0.1,
                                        key=f"{state.FLEET_DECODE_PRICE}{cards.index(decode_card)}")
policies = st.multiselect("Policies to plan", list(ft.POLICY_NAMES), default=list(ft.POLICY_NAMES),
                          format_func=ft.POLICY_NAMES.get, key=state.FLEET_POLICIES)
cols = st.columns(3)
max_batch = cols[0].number_input("Rows per instance (max batch)", 1, 1024, 64, 8, key=state.FLEET_MAX_BATCH)
budget = cols[1].number_input("Chunked prefill: tokens per step", 1, 65536, 2048, 256, key=state.FLEET_BUDGET)
link = cols[2].number_input("Disaggregated: KV link (GB/s)", 0.0, 10000.0, 50.0, 10.0, key=state.FLEET_LINK)

if st.button("Plan the fleet", type="primary", key=state.FLEET_PLAN):
    st.session_state.pop(state.FLEET_ERROR, None)
    with st.spinner("Simulating fleets…"):
        outcome = ft.run_planner(workload, rate, int(n), ttft_ms, tpot_ms, model_name, card, price, policies,
                                 int(max_batch), int(budget), link, decode_card, decode_price, peaks, trace=run)
    st.session_state[state.FLEET_RESULT if isinstance(outcome, dict) else state.FLEET_ERROR] = outcome

if state.FLEET_ERROR in st.session_state:
    st.error(st.session_state[state.FLEET_ERROR])
result = st.session_state.get(state.FLEET_RESULT)
if result:
    st.caption(result["step_model"])
    st.dataframe(ft.plan_table(result["plans"]), hide_index=True)
    theme_toggle.plotly_chart(fig_fleet.money_figure(result["plans"], ft.POLICY_NAMES))
    best = ft.cheapest(result["plans"])
    if best is None:
        st.warning("No fleet up to 256 instances met the objectives for 90 % of requests: loosen the SLOs or lower the "
                   "rate.")
    else:
        policy, p = best
        st.markdown(f"**Cheapest fleet meeting the SLOs:** {ft.POLICY_NAMES[policy]}, {ft.fleet_words(p)} — "
                    f"**{p.cost_per_million:.4g} per million tokens**.")
        st.markdown(ft.ledger_text(p, result["card"]))

st.subheader("Which card for which stage (the card model, no simulation)")
prices = {name: ft.example_price(name) for name in cards}
prices[card] = price
if decode_price is not None:  # a split fleet's own decode cards
    prices[decode_card] = decode_price
stages = ft.stage_cards(model_name, workload, prices, peaks, trace=run)
st.dataframe(stages, hide_index=True, width="stretch")
st.markdown(ft.stage_words(stages))
st.caption("Money per thousand requests of the workload's mean lengths: a prefill alone (batching does not share a "
           "compute-bound prefill), a decode step among up to 64 riders; at the prices above (examples for the cards "
           "not chosen). Estimates.")
