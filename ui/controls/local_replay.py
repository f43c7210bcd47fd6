"""The attention and KV-cache views of a run measured on the room's serving engine (--engine-url): the same prompt
replayed untimed by the local engine, on demand, with the server's timings kept."""
from __future__ import annotations

import streamlit as st

from engine.core.sampling_params import SamplingParams
from engine.serving.scheduling.work import Failed, ModelSpec, Request
from ui import state
from ui.engine_link import remote_engine, server_measurement, worker_link


def local_replay(trace, what: str, needs_kv: bool = False):
    """The trace itself when it has the model's insides (and its KV cache picture, if `needs_kv`); for a run measured
    on the room's serving engine (--engine-url), on demand, the same prompt replayed untimed by the local engine for
    `what` only it can show, with the server's timings kept. None, with the reason shown, when it cannot be drawn."""
    if trace.model_config is not None and not (needs_kv and trace.kv_key_norms is None):
        return trace
    spec = trace.settings.get("replay_spec") if trace.source == "server" else None
    if not spec:
        st.info(server_measurement.no_replay(trace, what))
        return None
    kept = worker_link.store().labs.get(state.REMOTE_REPLAY)
    if kept is not None and kept[0] is trace:
        replayed = kept[1]
    else:
        st.info(server_measurement.replay_offer(trace, what))
        if not st.button("Replay on the local engine (untimed)", key=state.REMOTE_REPLAY_RUN, type="primary"):
            return None
        sampling = trace.settings.get("sampling") or {}
        work = Request(model=ModelSpec(*spec), prompt_ids=list(trace.prompt_ids), max_new_tokens=max(1, trace.n_output),
                       params=SamplingParams(**sampling), prompt_text=trace.prompt_text, capture_attention=True)
        refused = worker_link.submit(work)
        if refused:
            st.error(f"Cannot replay: {refused}")
            return None
        with st.spinner(f"Replaying {trace.n_prompt} prompt tokens on the local engine (untimed)…"):
            final = worker_link.follow(work)
        if isinstance(final, Failed):
            st.error(f"The replay did not complete: {final.message}")
            return None
        replayed = remote_engine.with_local_insides(trace, final.result)
        worker_link.store().labs[state.REMOTE_REPLAY] = (trace, replayed)
    st.caption(server_measurement.replay_caption(replayed))
    return replayed
