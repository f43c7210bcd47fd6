"""Step-through controls shared by the Decode and Prefill pages: ◀ / ▶ buttons, Autoplay, its speed.

The position lives in session state under the page's own keys; autoplay reruns only the page's step fragment
(`st.fragment(run_every=...)`), advancing one step per period, and switches itself off at the last step. Presenter
mode's keyboard (ui/controls/presenter.py) presses these very buttons.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from ui import state

SPEEDS = [0.25, 0.5, 1.0, 2.0, 3.0, 5.0]  # seconds per step while autoplaying


@dataclass(frozen=True)
class StepKeys:
    position: str
    prev: str
    next: str
    autoplay: str
    speed: str
    last_tick: str  # monotonic time of the last autoplay advance
    done: str  # set when autoplay reached the last step: switch it off on the next full run


DECODE = StepKeys(state.DECODE_POSITION, state.DECODE_PREV, state.DECODE_NEXT, state.DECODE_AUTOPLAY,
                  state.DECODE_SPEED, state.DECODE_LAST_TICK, state.DECODE_AUTOPLAY_DONE)
PREFILL = StepKeys(state.PREFILL_POSITION, state.PREFILL_PREV, state.PREFILL_NEXT, state.PREFILL_AUTOPLAY,
                   state.PREFILL_SPEED, state.PREFILL_LAST_TICK, state.PREFILL_AUTOPLAY_DONE)


def move(keys: StepKeys, n_positions: int, delta: int) -> None:
    position = st.session_state.get(keys.position, 0) + delta
    st.session_state[keys.position] = max(0, min(n_positions - 1, position))


def controls(keys: StepKeys, n_positions: int, next_label: str = "Next token ▶") -> tuple[bool, float]:
    """The control row; returns (playing, seconds per step). Call outside the step fragment."""
    ss = st.session_state
    if keys.position in ss and ss[keys.position] not in range(n_positions):
        del ss[keys.position]  # a new run (other length or model): start again from the first step
    elif keys.position in ss:
        ss[keys.position] = ss[keys.position]  # kept even on runs that draw no slider (presenter mode)
    if ss.pop(keys.done, False):
        ss[keys.autoplay] = False  # autoplay reached the last step: stop (no endless redraws)
    row = st.columns([1, 1, 1.3, 1.7])
    row[0].button("◀ Previous", key=keys.prev, on_click=move, args=(keys, n_positions, -1), width="stretch")
    row[1].button(next_label, key=keys.next, on_click=move, args=(keys, n_positions, 1), type="primary", width="stretch")
    autoplay = row[2].toggle("Autoplay", key=keys.autoplay)
    speed = row[3].select_slider("Seconds per step", options=SPEEDS, value=1.0, key=keys.speed)
    return autoplay and ss.get(keys.position, 0) < n_positions - 1, speed


def tick(keys: StepKeys, n_positions: int, playing: bool, speed: float) -> int:
    """Inside the step fragment: advance once per period while playing; returns the position to draw."""
    ss = st.session_state
    if playing:  # advance once per period, whatever caused this rerun
        now = time.monotonic()
        if now - ss.get(keys.last_tick, now) >= 0.9 * speed:
            move(keys, n_positions, 1)
            ss[keys.last_tick] = now
        ss.setdefault(keys.last_tick, now)
        if ss.get(keys.position, 0) >= n_positions - 1:
            ss[keys.done] = True
            st.rerun()  # the whole page again, now without a timer: autoplay stops at the last step
    else:
        ss.pop(keys.last_tick, None)
    return ss.get(keys.position, 0)
