"""Home — two bends: the post-road story mapped onto prefill and decode, and this request's diagnosis."""
from pathlib import Path

import streamlit as st

from ui import state
from ui.controls import demo_panel, presenter, preset_buttons
from ui.engine_link import server_measurement, worker_link
from ui.figures import fig_timing
from ui.text import diagnosis, preset_lengths, run_numbers, story_text

ASSETS = Path(__file__).resolve().parents[2] / "assets"


def show_request(trace) -> None:
    """The measured ledger of the last run: metrics, phase split, diagnosis, prompt and output."""
    summary = run_numbers.summary(trace)
    st.subheader(f"This request — {trace.model} on {trace.device}, {trace.dtype}")
    st.caption(run_numbers.provenance(trace, worker_link.store().recorded or ""))
    if trace.source != "server" and trace.env.get("kernels"):  # the kernels' full label is long: under the heading
        st.caption(f"Kernels: {trace.env['kernels']}")
    cols = st.columns(5)
    cols[0].metric("TTFT (prefill)", f"{summary.ttft_s * 1000:,.1f} ms", help="request start to the first generated token")
    cols[1].metric("TPOT (decode)", f"{summary.tpot_s * 1000:,.1f} ms" if summary.output_tokens > 1 else "n/a",
                   help="(end-to-end − TTFT) / (output tokens − 1)")
    cols[2].metric("Total time", f"{summary.total_s:,.2f} s", help="TTFT + every decode step; warm-up and capture excluded")
    cols[3].metric("Tokens in", f"{summary.prompt_tokens:,}")
    cols[4].metric("Tokens out", f"{summary.output_tokens:,}", help=f"stopped by: {trace.stop_reason}")
    if waited := run_numbers.cpu_wait_caption(trace):
        st.caption(waited)
    where = "" if presenter.active() else run_numbers.chart_note(trace)  # presenting: the page's banner says it
    presenter.chart(fig_timing.phase_split_figure(summary, where=where), key="home_split",
                    name="phase_split")
    if note := preset_lengths.outcome(st.session_state.get(state.PRESET_APPLIED), summary,
                                   trace.settings.get("max_new_tokens")):
        st.markdown(note)

    if trace.source == "server":
        st.caption(server_measurement.outside_caption(trace))
    elif summary.queue_s >= 0.05:
        st.caption(f"Before it started, this request waited {summary.queue_s:,.2f} s for the shared engine "
                   "(other requests ran first). That queue time is not part of TTFT or any number above.")
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown(diagnosis.diagnose(summary).to_markdown())
        if sharing := run_numbers.sharing_note(trace):
            st.markdown(sharing)
    with right:
        st.markdown("**The generated text**")
        st.text(trace.text or "(only special tokens were generated)")
        with st.expander(f"The prompt sent ({trace.n_prompt} tokens, as the model saw it)"):
            st.text(trace.prompt_text or "(built by the measuring client as token ids; the text is the server's to decode)")


st.title("Two bends on the old post road")
presenting = presenter.active()
demo_panel.recorded_banner()
if not presenting:
    st.markdown(
        "An old post road reaches its destination through two bends. At the first, **Longmen Bay**, the road opens "
        "into a **wide valley** and the whole convoy gallops through side by side. At the second, it narrows to a "
        "**single-plank bridge** over a gorge, and riders cross one at a time. A language model answering a "
        "request travels the same road: first it reads your whole prompt, then it writes its answer one token "
        "after another."
    )

preset_buttons.buttons()
trace = worker_link.store().last_trace
if trace is None:
    presenter.press_run(" to send the prompt through the model. The measured time of each "
                        "segment, and a diagnosis of this request, will appear here.")
else:
    show_request(trace)
st.divider()

valley, bridge = st.columns(2, gap="large")
with valley:
    st.image(str(ASSETS / "valley.svg"), width="stretch")
    st.markdown(story_text.HOME_VALLEY)
with bridge:
    st.image(str(ASSETS / "bridge.svg"), width="stretch")
    st.markdown(story_text.HOME_BRIDGE)

st.markdown(
    "**Old Qin's ledger.** The dispatcher at the relay station never timed a journey as one number. He kept "
    "two columns, one for the valley and one for the bridge, because each segment is slowed by something "
    "different and cured by something different: fresh horses speed up the valley, but *the bridge doesn't "
    "recognise horsepower*. This dashboard keeps the same two columns for every request you run."
)
