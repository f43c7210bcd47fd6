"""What a browser keeps: its finished runs and lab results (shared by its tabs, kept across a refresh), and per
session the request or lab job it is waiting for.

Streamlit-free. The dashboard keeps one RunStore per session; its `Runs` belong to the browser (a random
token in a cookie, ui/engine_link/worker_link.py), so F5 or a second tab finds them, and no other browser
can. A janitor cancels a closed tab's work at once; `Browsers.sweep` shrinks the runs of a browser with no tab
open to KEPT_BYTES and drops them after ABANDON_S without a visit, or sooner when all kept runs pass KEPT_TOTAL_BYTES.
`LiveRun` is the run panel's picture of a request in flight, rebuilt from the scheduler's events.
"""
from __future__ import annotations

import pickle
import secrets
import statistics
import threading
from dataclasses import dataclass, field, replace

from engine.core.trace import DecodeStep, Trace
from engine.serving.scheduling.work import Done, Failed, FirstToken, Progress, Queued, Started, Token, Work

HISTORY_MAX = 30  # runs kept for the ledger's comparison (timings only: no attention, no cache picture)
ABANDON_S = 2 * 3600  # a browser's runs are dropped after this long with no tab open
KEPT_BYTES = 10 * 2**20  # a browser with no tab open keeps at most this (the README's budget for a default run kept)
KEPT_TOTAL_BYTES = 512 * 2**20  # all browsers with no tab open together; the least recently seen go first
TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 random bits


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
    sent: bool = False  # the request reached the engine (the run panel sends it once it is drawn)
    sent_after_s: float = 0.0  # seconds from its panel drawn to the request sent (a link's run waits for quiet cores)

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

    def seconds_left(self, recent: int = 8) -> float:
        """About how long the rest of the answer takes at the recent steps' pace (an end-of-sequence token may end it
        sooner); infinite before the first decode step."""
        if not self.steps:
            return float("inf")
        pace = statistics.median(s.seconds for s in self.steps[-recent:])
        return max(self.max_new_tokens - self.n_output, 0) * pace


def nbytes(obj) -> int:
    """About how much memory `obj` holds (its pickled size: arrays count in full, Python's object overhead not)."""
    try:
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - something that cannot be pickled: counted as nothing rather than failing the sweep
        return 0


def light(trace: Trace) -> Trace:
    """A run without its attention captures and cache picture (the Prefill and Decode pages capture them again
    from the run's tokens when its model is known: job_progress.ensure_layer)."""
    return replace(trace, attention=None, kv_key_norms=None, kv_value_norms=None)


@dataclass
class Runs:
    """What a browser keeps across its tabs and refreshes: finished runs and lab results, never work in flight."""
    last_trace: Trace | None = None  # the latest finished run, with its attention captures
    history: list[Trace] = field(default_factory=list)  # every run of the browser, light copies
    labs: dict = field(default_factory=dict)  # lab results by the lab's state key
    recorded: str | None = None  # the label of the recorded run the pages show (None: a run measured here)
    token: str = field(default="", repr=False)  # the browser's token (its cookie), set by Browsers
    interrupted: list = field(default_factory=list)  # in a room: (key, words, when) of runs a restart cut short

    def nbytes(self) -> int:
        return nbytes(self.last_trace) + sum(nbytes(t) for t in self.history) + nbytes(self.labs)

    def shrink(self, budget: int) -> None:
        """Fit in `budget` bytes: first the shown run loses its captures, then the oldest runs and lab results go."""
        if self.nbytes() <= budget:
            return
        if self.last_trace is not None:
            self.last_trace = light(self.last_trace)
        while self.nbytes() > budget and (self.labs or len(self.history) > 1):
            if self.labs:
                self.labs.pop(next(iter(self.labs)))
            else:
                self.history = self.history[1:]
        if self.nbytes() > budget:
            self.last_trace, self.history = None, []

    def kept_copy(self, budget: int) -> Runs:
        """What a room's file keeps of these runs: light copies (no attention captures, which the pages capture again
        from a run's tokens), fitted in `budget` bytes; no token and no work in flight."""
        copy = Runs(light(self.last_trace) if self.last_trace is not None else None, list(self.history),
                    dict(self.labs), self.recorded)
        copy.shrink(budget)
        return copy

    def fingerprint(self) -> tuple:
        """Changes whenever a run is kept, a recording opened or a lab result stored or replaced (cheap: identities,
        not contents), so a saver writes these runs only when they changed."""
        labs = tuple((k, id(v), tuple((kk, id(vv)) for kk, vv in v.items()) if isinstance(v, dict) else ())
                     for k, v in list(self.labs.items()))
        return id(self.last_trace), len(self.history), id(self.history[-1]) if self.history else 0, self.recorded, labs


def _shared(name: str):
    """A RunStore attribute that lives in the browser's Runs."""
    return property(lambda self: getattr(self.runs, name), lambda self, value: setattr(self.runs, name, value))


class RunStore:
    """One session's view: the browser's `runs` (last run, history, lab results, the recorded label) plus its own
    request and lab jobs in flight (a second tab follows its own work, never another tab's)."""

    last_trace = _shared("last_trace")
    history = _shared("history")
    labs = _shared("labs")
    recorded = _shared("recorded")

    def __init__(self, last_trace: Trace | None = None, history: list[Trace] | None = None, live: LiveRun | None = None,
                 labs: dict | None = None, jobs: dict | None = None, runs: Runs | None = None):
        self.runs = runs if runs is not None else Runs(last_trace, history or [], labs or {})
        self.live = live  # the request in flight
        self.jobs = jobs or {}  # lab jobs in flight, by the lab's state key

    def keep(self, trace: Trace, recorded: str | None = None) -> None:
        """A finished run: the newest keeps everything the pages draw, the history keeps timings only.

        `recorded` labels a run opened from a file (ui/controls/demo_panel.py) rather than run in this session."""
        self.last_trace, self.recorded = trace, recorded
        self.history = (self.history + [light(trace)])[-HISTORY_MAX:]

    def in_flight(self) -> list[Work]:
        works = [] if self.live is None or self.live.finished else [self.live.work]
        return works + list(self.jobs.values())

    def forget_work(self) -> None:
        """The session is gone: its work in flight is no longer followed (the browser's runs stay)."""
        self.live, self.jobs = None, {}

    def clear(self) -> None:
        self.forget_work()
        self.runs.last_trace, self.runs.recorded, self.runs.history, self.runs.labs = None, None, [], {}


@dataclass
class _Browser:
    runs: Runs
    seen: float  # monotonic time of the latest visit (a script run, or a sweep that found one of its tabs open)
    sessions: set = field(default_factory=set)  # Streamlit session ids that showed these runs
    shrunk: bool = False  # fitted in KEPT_BYTES since its last tab closed


class Browsers:
    """Every browser's runs, by the random token its cookie holds. Streamlit-free: times are passed in."""

    def __init__(self):
        self._by_token: dict[str, _Browser] = {}
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_token)

    def visit(self, token: str | None, session_id: str, now: float) -> tuple[str, Runs]:
        """The token to keep and its runs: those of `token` when this server knows it, else a new random token
        with no runs (an unknown or expired cookie never chooses its own token)."""
        with self.lock:
            browser = self._by_token.get(token) if isinstance(token, str) else None
            if browser is None:
                token = secrets.token_urlsafe(TOKEN_BYTES)
                browser = self._by_token[token] = _Browser(Runs(token=token), now)
            browser.sessions.add(session_id)
            browser.seen, browser.shrunk = now, False
            return token, browser.runs

    def adopt(self, token: str, runs: Runs | None, now: float) -> Runs:
        """A browser's runs read back from a room's file (None: none kept yet): its cookie finds them again. Returns
        the runs this server now keeps for that token."""
        with self.lock:
            browser = self._by_token.setdefault(token, _Browser(runs if runs is not None else Runs(), now))
            browser.runs.token = token
            return browser.runs

    def drop(self, tokens: list[str]) -> list[str]:
        """Forget these browsers' runs (a cleared room); returns the tokens that were known."""
        with self.lock:
            return [token for token in tokens if self._by_token.pop(token, None) is not None]

    def kept(self) -> list[tuple[str, Runs, bool]]:
        """(token, runs, a tab open) of every browser, for a room's saver."""
        with self.lock:
            return [(token, b.runs, bool(b.sessions)) for token, b in self._by_token.items()]

    def sweep(self, is_active, now: float) -> bool:
        """Refresh the browsers with a tab open (`is_active(session_id)`), shrink those with none, drop those unseen
        for ABANDON_S and, beyond KEPT_TOTAL_BYTES, the least recently seen. True when memory was given up."""
        freed = False
        with self.lock:
            idle = []
            for token, browser in list(self._by_token.items()):
                browser.sessions = {sid for sid in browser.sessions if is_active(sid)}
                if browser.sessions:
                    browser.seen, browser.shrunk = now, False
                elif now - browser.seen >= ABANDON_S:
                    del self._by_token[token]
                    freed = True
                else:
                    if not browser.shrunk:
                        browser.runs.shrink(KEPT_BYTES)
                        browser.shrunk, freed = True, True
                    idle.append((browser.seen, token))
            total = sum(self._by_token[t].runs.nbytes() for _, t in idle)
            for _, token in sorted(idle):
                if total <= KEPT_TOTAL_BYTES:
                    break
                total -= self._by_token.pop(token).runs.nbytes()
        return freed
