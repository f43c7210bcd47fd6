"""Measure a server — the same ledger for any OpenAI-compatible server (vLLM, llama.cpp, SGLang, TGI, Ollama, ours)."""
import streamlit as st

from ui import state
from ui.controls import theme_toggle
from ui.engine_link import server_measurement, worker_link
from ui.errors import EngineError
from ui.figures import fig_timing
from ui.text import run_numbers, runs, traffic_text

st.title("Measure a server")
st.markdown(
    "At scale the two bends are crossed by real serving engines — vLLM can even put prefill and decode on "
    "separate fleets of machines (*disaggregated prefill*: the valley and the bridge as two kinds of machine). "
    "This page times any OpenAI-compatible server from the outside, with vLLM's definitions, and draws its "
    "requests with the same panels as your local runs. Each prompt has exactly the length you pick and starts "
    "with its own tag, so no prefix cache helps; `ignore_eos` makes every answer exactly as long as asked."
)

allowed = server_measurement.allowed_hosts()
ss = st.session_state
ss.setdefault(state.MEASURE_URL, f"http://{allowed[0]}" if allowed else "")
if not allowed:
    st.text_input("Server URL", value=ss[state.MEASURE_URL], key=state.MEASURE_URL, disabled=True, placeholder="off on this dashboard")
    st.info("Measuring other servers is **off** here: a class dashboard must not fetch arbitrary addresses for "
            "anyone in the room. The operator can allow chosen hosts when starting it: "
            "`bash scripts/dashboard.sh --measure-hosts 127.0.0.1:8000,gpu-box` "
            f"(or the environment variable `{server_measurement.ENV}`). From a terminal anyone can run "
            "`python -m engine measure --url URL --prompt-tokens N --max-new-tokens M`.", icon=":material/lock:")
    st.stop()

top = st.columns([3, 2])
url = top[0].text_input("Server URL", value=ss[state.MEASURE_URL], key=state.MEASURE_URL, help=f"allowed hosts: {', '.join(allowed)}")
model = top[1].text_input("Model (empty: the first the server lists)", key=state.MEASURE_MODEL)
st.caption(f"The operator allows: {', '.join(f'`{h}`' for h in allowed)}. Try it on this engine: "
           "`python -m engine serve --port 8000`, or a vLLM: `bash scripts/start_vllm.sh 8001`.")
sliders = st.columns(4)
n_prompt = sliders[0].slider("Prompt tokens", 1, 2048, 128, key=state.MEASURE_PROMPT_TOKENS)
n_out = sliders[1].slider("Output tokens", 2, 512, 32, key=state.MEASURE_OUTPUT_TOKENS)
n_requests = sliders[2].slider("Requests", 1, 16, 3, key=state.MEASURE_REQUESTS)
concurrency = sliders[3].slider("At once (concurrency)", 1, 8, 1, key=state.MEASURE_CONCURRENCY)
shared = st.checkbox("Shared prefix (prompts differ only at the end: lets a prefix cache help)", key=state.MEASURE_SHARED_PREFIX)
store = worker_link.store()
offer = server_measurement.traffic_offer(store.labs.get(state.TRAFFIC_WORKLOAD))  # the Traffic lab's latest workload
replaying = offer is not None and st.checkbox(offer, key=state.TRAFFIC_REPLAY)
if replaying:
    n_requests = store.labs[state.TRAFFIC_WORKLOAD][0].num_requests
if st.button("Measure", key=state.MEASURE_RUN, type="primary"):
    try:
        checked = server_measurement.check_url(url, allowed)
    except EngineError as exc:
        st.error(f"Cannot measure: {exc}")
        st.stop()
    bar = st.progress(0.0, text=f"Measuring {checked}: one warm-up request, then {n_requests}…")

    def arrived(rec: dict) -> None:
        bar.progress(rec["request"] / n_requests, text=f"Request {rec['request']} of {n_requests} measured")

    try:
        cmd = server_measurement.command(checked, model.strip() or None, n_prompt, n_out, n_requests, concurrency, shared)
        if replaying:
            cmd = server_measurement.traffic_command(checked, model.strip() or None, *store.labs[state.TRAFFIC_WORKLOAD])
        records = server_measurement.run_measurement(cmd, arrived)
    except EngineError as exc:
        bar.empty()
        st.error(f"The measurement failed: {exc}")
        st.stop()
    bar.empty()
    for trace in run_numbers.server_traces(records):
        store.keep(trace)  # next to local runs in the session's history (Timing page)
    store.labs[state.MEASURE_RESULT] = records

records = store.labs.get(state.MEASURE_RESULT)
if not records:
    st.info("Pick a server and press **Measure**.", icon=":material/speed:")
    st.stop()

first = records[0]
traces = run_numbers.server_traces(records)
st.subheader(f"{first['url']} · {first['model']}: {len(records)} request(s), {first['concurrency']} at a time")
st.caption(f"{first['prompt_tokens']} prompt tokens (counted with "
           f"{'the server' if first['tokenizer'] == 'server' else 'our SmolLM2'}'s tokenizer) → {first['output_tokens']} "
           "output tokens each; a warm-up request was sent first and is left out. These runs are now in your run "
           "history (Timing page), next to your local runs.")
table = server_measurement.comparison_table(records)
st.markdown("**Client-side and server-side** — the client's numbers include the network and the server's HTTP "
            "layer; the server's come from its own `/metrics` (vLLM's names). Close agreement means the client "
            "measured the engine, not the road to it.")
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.1f") for c in table.columns if "(ms)" in c})
if "arrived_s" in first:  # a replayed Traffic-lab workload: judged against the lab's SLOs
    slo = traffic_text.slo_of(ss.get(state.TRAFFIC_SLO_TTFT, 2000.0), ss.get(state.TRAFFIC_SLO_TPOT, 200.0))
    st.dataframe(server_measurement.traffic_table(records, slo), hide_index=True, width="stretch")
if table["server mean (ms)"].isna().all():
    st.caption("This server has no `/metrics` with vLLM's names: client-side numbers only.")

pick = st.selectbox("Request shown in the ledger", list(range(1, len(traces) + 1)), index=len(traces) - 1,
                    key=state.MEASURE_PICK, format_func=lambda i: f"request {i}")
trace = traces[pick - 1]
summary = run_numbers.summary(trace)
theme_toggle.plotly_chart(fig_timing.phase_split_figure(summary), key="ms_split")
left, right = st.columns(2, gap="large")
theme_toggle.plotly_chart(fig_timing.itl_figure(trace.prefill_seconds, [s.seconds for s in trace.steps]), left, key="ms_itl")
theme_toggle.plotly_chart(fig_timing.cumulative_figure(trace), right, key="ms_cumulative")
st.dataframe(runs.metrics_table(summary, server=True), hide_index=True, width="stretch",
             column_config={"value": st.column_config.NumberColumn(format="%.2f")})
requests_table = runs.runs_table(traces)
theme_toggle.plotly_chart(fig_timing.runs_figure(requests_table), key="ms_runs")
