"""The one-click presets: a quick probe measures this machine's rates, then each button fills the sidebar with
lengths that show its verdict and runs (Streamlit-bound; the choice itself is ui/text/preset_lengths.py)."""
from __future__ import annotations

import streamlit as st

from engine.core.sampling_params import SamplingParams
from engine.errors import EngineError
from engine.serving.scheduling.work import Done, Request
from ui import state
from ui.demo import recorded
from ui.engine_link import job_progress, worker_link
from ui.text import preset_lengths, prompts


def _limits(lm) -> tuple[int, int]:
    """The longest prompt and output the presets may use: the sliders' ranges, inside the model's context."""
    context = lm.config.max_seq_len
    return min(prompts.PROMPT_TOKENS_MAX, context - 32), min(prompts.OUTPUT_TOKENS_MAX, context - preset_lengths.SHORT_PROMPT)


def _rates():
    return worker_link.store().labs.get(state.PRESET_RATES, {}).get(worker_link.current_spec())


def _pick(verdict: str) -> None:
    st.session_state[state.PRESET_PENDING] = verdict


def apply_pending() -> None:
    """Before the sidebar's widgets exist: a clicked preset whose rates are known sets the lengths and asks for a run."""
    ss = st.session_state
    verdict = ss.get(state.PRESET_PENDING)
    rates = _rates() if verdict else None
    if rates is None:
        return
    try:
        lm = job_progress.model_info(worker_link.current_spec())
    except EngineError:
        return
    preset = preset_lengths.choose(rates, *_limits(lm))[verdict]
    ss.pop(state.PRESET_PENDING)
    ss[state.EXAMPLE] = preset.example
    ss[state.PROMPT] = prompts.example(preset.example).text
    ss[state.FIT_PROMPT], ss[state.CHAT], ss[state.TEMPERATURE] = True, False, 0.0
    ss[state.IGNORE_EOS] = True  # the preset's output length is what its verdict was chosen for: all of it
    ss[state.PROMPT_TOKENS], ss[state.MAX_NEW_TOKENS] = preset.prompt_tokens, preset.output_tokens
    ss[state.PRESET_APPLIED] = preset
    ss[state.RUN_REQUESTED] = True


def _probe(lm, lengths: list[int]):
    """A few short runs through the same engine path as Run (scheduler, greedy), kept out of the run history;
    their measured TTFTs and decode steps are the rates the presets are chosen from."""
    spec, text = worker_link.current_spec(), prompts.example(preset_lengths.PRESET_EXAMPLES["prefill"]).text
    bar = st.progress(0.0, text="Measuring this machine's rates for the presets (a few short runs)…")
    traces = []
    for i, n in enumerate(lengths):
        ids = prompts.fit_prompt_to_tokens(lm.tokenizer, text, n).ids
        work = Request(model=spec, prompt_ids=list(ids), max_new_tokens=preset_lengths.PROBE_OUTPUT,
                       params=SamplingParams(), prompt_text="", chat=False)
        refused = worker_link.submit(work)
        if refused:
            bar.empty()
            st.error(f"Cannot measure the rates: {refused}")
            return None
        final = worker_link.follow(work)
        if not isinstance(final, Done):
            bar.empty()
            st.error(f"Cannot measure the rates: {getattr(final, 'message', 'the run did not finish')}")
            return None
        traces.append(final.result)
        bar.progress((i + 1) / len(lengths), text=f"Rates: {n} prompt tokens measured ({i + 1} of {len(lengths)})")
    bar.empty()
    return preset_lengths.rates_from_traces(traces)


def buttons() -> None:
    """Three buttons, one per verdict; the first click of a session measures the rates (a few seconds)."""
    if recorded.replay_only():
        return
    rates = _rates()
    st.markdown("**One click, one verdict on this machine:**")
    cols = st.columns(3)
    chosen = None
    if rates is not None:
        try:
            chosen = preset_lengths.choose(rates, *_limits(job_progress.model_info(worker_link.current_spec())))
        except EngineError:
            chosen = None
    for col, verdict in zip(cols, ("prefill", "even", "decode")):
        label = chosen[verdict].label if chosen else preset_lengths.PRESET_NAMES[verdict]
        col.button(label, key=state.PRESET_BUTTON + verdict, on_click=_pick, args=(verdict,), width="stretch",
                   help=f"{preset_lengths.predicted_words(chosen[verdict])}, example: {chosen[verdict].example}" if chosen
                   else "The first click measures this machine's rates (a few short runs), then runs.")
    if st.session_state.get(state.PRESET_PENDING) and rates is None:
        try:
            lm = job_progress.model_info(worker_link.current_spec())
        except EngineError as exc:
            st.error(f"Cannot choose presets: {exc}")
            return
        rates = _probe(lm, preset_lengths.probe_lengths(_limits(lm)[0]))
        if rates is not None:
            worker_link.store().labs.setdefault(state.PRESET_RATES, {})[worker_link.current_spec()] = rates
            st.rerun()
        st.session_state.pop(state.PRESET_PENDING, None)
    if rates is not None:
        st.caption(preset_lengths.how_chosen(rates))
