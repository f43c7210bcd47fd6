"""Fair to every student: one run in flight per session in a room, and who may start lab measurements.

Streamlit-free. A second Run while the first is still in the engine gets one clear line instead of a second place in
the queue, so thirty students get thirty places, not one student sixty. A slot frees itself when its work's final
event arrives, when the work is cancelled, or when the session's tab closes (the worker link's janitor).
"""
from __future__ import annotations

import queue
import threading
import time

from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.work import FINAL, Job, Request, Started, Work

ONE_AT_A_TIME = ("Your earlier run is still in the engine (waiting or running): one run at a time per student keeps "
                 "the room fair. Wait for it to finish, or cancel it, then run again.")
LAB_REFUSALS = {
    "teacher": "In this room the lab measurements are the teacher's: watch them on the projector. "
               "(The teacher can open the labs to everyone on the teacher console.)",
    "none": "Lab measurements are switched off in this room for now (the teacher's setting on the teacher console).",
}
NOT_LABS = (lab_jobs.MODEL_DESCRIBE.name, lab_jobs.ATTENTION_CAPTURE.name)  # what every page needs: not a lab


class Watched(queue.Queue):
    """A work item's event queue that notes, as the engine sends them (whoever reads the events), when the engine
    started the work and when its final event arrived: the teacher console's waiting and running counts come from
    here, the engine's own events, not from what each page has read so far."""

    def __init__(self):
        super().__init__()
        self.ended = threading.Event()
        self.started: Started | None = None  # the engine's Started event (its queue_seconds), once it came
        self.ended_at: float | None = None  # time.monotonic() at the final event

    def put(self, item, *args, **kwargs):
        if isinstance(item, Started):
            self.started = item
        super().put(item, *args, **kwargs)
        if isinstance(item, FINAL):
            self.ended_at = time.monotonic()
            self.ended.set()


def is_lab(work: Work) -> bool:
    return isinstance(work, Job) and work.name not in NOT_LABS


def lab_refusal(policy: str, role: str) -> str | None:
    """None when this role may start a lab job under the room's policy; else the line to show."""
    if role == "solo" or policy == "all" or (policy == "teacher" and role == "teacher"):
        return None
    return LAB_REFUSALS.get(policy, LAB_REFUSALS["teacher"])


def in_flight(work: Work | None) -> bool:
    if work is None or work.cancelled.is_set():
        return False
    ended = getattr(work.events, "ended", None)
    return ended is None or not ended.is_set()


def describe(work: Work) -> str:
    """The work in a few words, for the teacher console ("64 → 32 tokens", "prompt-length sweep")."""
    if isinstance(work, Request):
        return f"{len(work.prompt_ids)} → {work.max_new_tokens} tokens"
    return getattr(work, "label", "") or "lab measurement"


class Slots:
    """Which session holds which work in the engine (thread-safe)."""

    def __init__(self):
        self._held: dict[str, Work] = {}
        self._lock = threading.Lock()

    def refusal(self, session_id: str) -> str | None:
        with self._lock:
            return ONE_AT_A_TIME if in_flight(self._held.get(session_id)) else None

    @staticmethod
    def watch(work: Work) -> Work:
        """Give `work` an event queue that notes its end; call before submitting (events may come at once)."""
        if not isinstance(work.events, Watched):
            work.events = Watched()
        return work

    def hold(self, session_id: str, work: Work) -> None:
        with self._lock:
            self._held[session_id] = work

    def release(self, session_id: str) -> Work | None:
        """Free the session's slot; returns the work it held (still in flight or not)."""
        with self._lock:
            return self._held.pop(session_id, None)

    def busy(self) -> dict[str, Work]:
        """The sessions with work in the engine now."""
        with self._lock:
            return {sid: w for sid, w in self._held.items() if in_flight(w)}
