"""A room's rules for one session, as the engine link asks them before anything reaches the engine (Streamlit-free).

The gate (ui/room/gate.py) puts an Admission in each admitted session's state; ui/engine_link/worker_link.py asks it
without importing the room (the room sits above the link). Outside room mode a session has none: everything is open.
"""
from __future__ import annotations

from engine.serving.scheduling.work import Request, Work
from ui.room.registry import Room
from ui.room.slots import Slots, is_lab, lab_refusal


class Admission:
    def __init__(self, room: Room, slots: Slots, session_id: str, role: str, saver=None):
        self.room, self.slots, self.session_id, self.role, self.saver = room, slots, session_id, role, saver

    def check(self, work: Work) -> str | None:
        """None when `work` may go to the engine (its events are then watched, so its slot frees itself when it
        ends); else the one line to show instead."""
        refused = self.lab_refusal() if is_lab(work) else None
        refused = refused or self.slots.refusal(self.session_id)
        if refused is None:
            Slots.watch(work)
        return refused

    def sent(self, work: Work, browser=None) -> None:
        """The engine took `work` for `browser` (its Runs, ui/engine_link/run_store.py): it holds this session's slot
        until it ends, and is noted in the room's file until its result is saved."""
        self.slots.hold(self.session_id, work)
        if self.saver is not None and getattr(browser, "token", "") and (isinstance(work, Request) or is_lab(work)):
            self.saver.flight(work, browser.token)  # a run or a lab (not a model's description: nothing to lose)

    def busy(self) -> str | None:
        """The line to show when this session already has work in the engine; None when it has none."""
        return self.slots.refusal(self.session_id)

    def lab_refusal(self) -> str | None:
        return lab_refusal(self.room.locks.labs, self.role)
