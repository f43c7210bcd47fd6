"""What one browser session keeps: its runs (compactly) and the request or lab job it is waiting for.

Streamlit-free. The dashboard keeps one RunStore per session and a janitor clears it as soon as the
session's tab is gone, rather than when Streamlit forgets a disconnected session (minutes later).
`LiveRun` is the run panel's picture of a request in flight, rebuilt from the scheduler's events.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.core.trace import DecodeStep, Trace
from engine.serving.scheduling.work import Done, Failed, FirstToken, Progress, Queued, Started, Token, Work

HISTORY_MAX = 30  # runs kept for the ledger's comparison (timings only: no attention, no cache picture)


@dataclass
class LiveRun:
    """A request in flight, as the events told it so far."""
    work: Work
    n_prompt: int
    max_new_tokens: int
    position: int | None = None  # place in the queue while waiting (1 = next)
    expected_wait_s: float = 0.0
    queue_seconds: float | None = None  # known once it started
    prefill_seconds: float | None = None  # known once the first token is out
    steps: list[DecodeStep] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    message: str = ""  # e.g. "capturing attention…"
    trace: Trace | None = None  # the finished run
    failure: str | None = None
    cancelled: bool = False

    def apply(self, event) -> None:
        if isinstance(event, Queued):
            self.position, self.expected_wait_s = event.position, event.expected_wait_s
        elif isinstance(event, Started):
            self.position, self.queue_seconds = None, event.queue_seconds
        elif isinstance(event, FirstToken):
            self.prefill_seconds = event.prefill_seconds
            self.pieces.append(event.piece)
        elif isinstance(event, Token):
            self.steps.append(event.step)
            self.pieces.append(event.piece)
        elif isinstance(event, Progress):
            self.message = event.message
        elif isinstance(event, Done):
            self.trace = event.result
        elif isinstance(event, Failed):
            self.failure, self.cancelled = event.message, event.cancelled

    @property
    def finished(self) -> bool:
        return self.trace is not None or self.failure is not None

    @property
    def n_output(self) -> int:
        return len(self.pieces)


@dataclass
class RunStore:
    last_trace: Trace | None = None  # the latest finished run, with its attention captures
    history: list[Trace] = field(default_factory=list)  # every run of the session, light copies
    live: LiveRun | None = None  # the request in flight
    labs: dict = field(default_factory=dict)  # lab results by the lab's state key
    jobs: dict = field(default_factory=dict)  # lab jobs in flight, by the lab's state key
    recorded: str | None = None  # the label of the recorded run the pages show (None: a run of this session)

    def keep(self, trace: Trace, recorded: str | None = None) -> None:
        """A finished run: the newest keeps everything the pages draw, the history keeps timings only.

        `recorded` labels a run opened from a file (ui/controls/demo_panel.py) rather than run in this session."""
        self.last_trace, self.recorded = trace, recorded
        light = replace(trace, attention=None, kv_key_norms=None, kv_value_norms=None)
        self.history = (self.history + [light])[-HISTORY_MAX:]

    def in_flight(self) -> list[Work]:
        works = [] if self.live is None or self.live.finished else [self.live.work]
        return works + list(self.jobs.values())

    def clear(self) -> None:
        self.last_trace, self.live, self.recorded = None, None, None
        self.history, self.labs, self.jobs = [], {}, {}
