"""Slowing down guesses at the room's code: exponential back-off per client after a few wrong tries (Streamlit-free).

A client is known by one or more keys: its browser session ("session:<id>") and, where the server sees one, its
remote address ("ip:<addr>"). Each key has its own count of wrong codes; after `free` of them every further wrong
code doubles the wait before the next try is even looked at (base, 2·base, 4·base ... up to `cap`). The address
gets more free tries than a session, since a whole class may share one address behind a router: one student's
typos must not lock out the room, while a script that opens fresh sessions still meets the back-off.
A key's count is forgotten after `forget_s` without a wrong code. Guessing a 6-letter code from a 32-letter
alphabet (10⁹ codes) at this pace takes far longer than a workshop. Same idea as OpenSSH's and Django-axes' limits.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

BASE_S = 2.0  # the first wait after the free tries
CAP_S = 300.0  # the longest wait between two tries
FORGET_S = 900.0  # a quiet quarter of an hour clears a key's record
FREE = {"session": 3, "ip": 10}  # wrong codes allowed without any wait, per kind of key


@dataclass
class _Record:
    failures: int = 0
    last: float = 0.0  # time of the latest wrong code
    until: float = 0.0  # no try is looked at before this time


def client_keys(session_id: str, address: str | None) -> list[str]:
    """The keys of one client: its session, and its address when the server knows it."""
    return [f"session:{session_id}"] + ([f"ip:{address}"] if address else [])


class Throttle:
    def __init__(self, base_s: float = BASE_S, cap_s: float = CAP_S, forget_s: float = FORGET_S,
                 free: dict[str, int] | None = None, clock=time.monotonic):
        self.base_s, self.cap_s, self.forget_s = base_s, cap_s, forget_s
        self.free = dict(FREE if free is None else free)
        self.clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def _record(self, key: str, now: float) -> _Record:
        rec = self._records.get(key)
        if rec is None or now - rec.last > self.forget_s:
            rec = self._records[key] = _Record()
        return rec

    def wait_left(self, keys: list[str]) -> float:
        """Seconds before this client may try a code again (0: now)."""
        now = self.clock()
        with self._lock:
            return max([0.0] + [self._record(k, now).until - now for k in keys])

    def failed(self, keys: list[str]) -> float:
        """Count one wrong code for every key of the client; returns the wait it now has to sit out."""
        now = self.clock()
        with self._lock:
            for key in keys:
                rec = self._record(key, now)
                rec.failures, rec.last = rec.failures + 1, now
                over = rec.failures - self.free.get(key.split(":", 1)[0], 3)
                if over > 0:
                    rec.until = now + min(self.cap_s, self.base_s * 2 ** (over - 1))
        return self.wait_left(keys)

    def succeeded(self, keys: list[str]) -> None:
        """A right code clears the session's record; an address keeps its count (others behind it may be guessing)."""
        with self._lock:
            for key in keys:
                if key.startswith("session:"):
                    self._records.pop(key, None)

    def failures(self, key: str) -> int:
        now = self.clock()
        with self._lock:
            return self._record(key, now).failures
