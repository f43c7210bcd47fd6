"""What the dashboard asks of an engine, in one small typed interface: submit a Request (its events stream back on
`work.events`: Queued, Started, FirstToken, Token, then Done with the Trace or Failed), submit a Job (Progress, then
Done with the lab's result), cancel either, ask the status.

Two engines implement it: the dashboard's own worker (engine/serving/scheduling/worker.py's LocalService in a thread,
ProcessService in a child process), and the room's serving engine (ui/engine_link/remote_engine.py: any
OpenAI-compatible server, each Run timed from outside). Streamlit-free; the session's side (room rules, the
run store, one worker for every session) is ui/engine_link/worker_link.py.
"""
from __future__ import annotations

import queue
from typing import Protocol, runtime_checkable

from engine.serving.scheduling.work import FINAL, Work


@runtime_checkable
class EngineClient(Protocol):
    def submit(self, work: Work) -> Work:
        """Take `work`; its events arrive on `work.events`. EngineError (QueueFull: 429's retry-after) when refused."""

    def cancel(self, work: Work) -> None:
        """Stop `work` wherever it is (waiting or running); its final event is Failed(cancelled=True)."""

    def status(self) -> dict:
        """The engine's mode and queue (at least "mode"); EngineError when it is not running."""


def follow(work: Work, on_event=None, poll_s: float = 0.1):
    """Read `work`'s events until its final one, which is returned; `on_event(event)` after each, and with None every
    `poll_s` seconds without one (so a caller may redraw while it waits)."""
    while True:
        try:
            event = work.events.get(timeout=poll_s)
        except queue.Empty:
            event = None
        if on_event is not None:
            on_event(event)
        if isinstance(event, FINAL):
            return event
