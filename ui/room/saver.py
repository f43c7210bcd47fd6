"""Browsers' kept runs into the room's file, and the runs in flight noted so a restart shows them interrupted.

Streamlit-free (it is handed the server's Browsers, ui/engine_link/run_store.py). A thread looks every SAVE_EVERY_S
for browsers whose runs changed (a run kept, a lab result stored: their fingerprint, a tuple of identities, moved) and
saves a light copy of each, fitted to the same budget a browser with no tab open keeps in memory (KEPT_BYTES); all
browsers together stay within KEPT_TOTAL_BYTES in the file, the ones saved longest ago dropped first, and a browser the
server forgot (ABANDON_S without a visit) leaves the file too. A run or lab job is noted in the file when the engine
takes it, and its note is removed only once its browser's runs were saved after its end: a server killed in between
finds the note and tells the student that run was interrupted. It is never shown as finished.
"""
from __future__ import annotations

import os
import threading
import time
import weakref

from ui.room.slots import describe

SAVE_EVERY_S = 1.0
SETTLE_S = 1.0  # a run's result is in its browser's runs within this after the engine's final event
GIVE_UP_AFTER = 3  # looks in a row a browser's runs could not be pickled before it is said (and not retried)
SERVER_START = f"{os.getpid()}-{time.time():.0f}"  # work ids restart at every start: keys carry the start


def _ended_before(work, began: float) -> bool:
    """The engine's final event for `work` came SETTLE_S or more before `began` (its result kept by then)."""
    ended_at = getattr(work.events, "ended_at", None)
    return ended_at is not None and ended_at <= began - SETTLE_S


class RunSaver:
    def __init__(self, keeper, browsers, kept_bytes: int, total_bytes: int):
        self.keeper, self.browsers = keeper, browsers
        self.kept_bytes, self.total_bytes = kept_bytes, total_bytes
        self._saved: dict[str, tuple] = {}  # token -> the fingerprint of its runs as last saved
        self._failures: dict[str, int] = {}  # token -> looks in a row at which its runs could not be pickled
        self._flights: dict[str, object] = {}  # work key -> the work (its events note its end)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def read_back(self) -> int:
        """Every browser's runs from the file into the server's Browsers (their cookies find them again), with the
        runs that were in flight when the server stopped. Returns how many browsers came back."""
        now = time.monotonic()
        runs_by_token = {}
        for token, runs, _seen in self.keeper.saved_runs():
            self.browsers.adopt(token, runs, now)
            runs_by_token[token] = runs
            self._saved[token] = runs.fingerprint()
        for flight in self.keeper.flights():
            runs = runs_by_token.get(flight.token)
            if runs is None:  # a browser that had no kept runs yet: its first run was the one cut short
                runs = runs_by_token[flight.token] = self.browsers.adopt(flight.token, None, now)
                self._saved[flight.token] = runs.fingerprint()
            runs.interrupted.append((flight.work_key, flight.what, flight.since))
        return len(runs_by_token)

    def flight(self, work, token: str) -> None:
        """The engine took `work` for the browser `token`: noted in the file until its result is saved."""
        key = f"{SERVER_START}:{work.id}"
        with self._lock:
            self._flights[key] = work
        self.keeper.flight_started(key, token, describe(work))

    def seen_interrupted(self, runs) -> None:
        """The browser was told about its interrupted runs: their notes leave the file."""
        keys = [key for key, _, _ in runs.interrupted]
        runs.interrupted.clear()
        self.keeper.flights_ended(keys)

    def forget(self, tokens: list[str]) -> None:
        """These browsers' runs are gone (a cleared room): out of the file and out of the saver's memory."""
        with self._lock:
            for token in tokens:
                self._saved.pop(token, None)
        self.keeper.forget_runs(tokens)

    def restarted(self) -> None:
        """The room's file was deleted and made anew: everything still kept is saved again at the next look."""
        with self._lock:
            self._saved.clear()

    def tick(self) -> None:
        """One look: save what changed, drop what the server forgot, keep the file within budget, clear the notes
        of runs whose results are saved."""
        began = time.monotonic()
        kept = self.browsers.kept()
        with self._lock:
            for token, runs, _active in kept:
                fingerprint = None
                try:  # a page may be changing these runs right now: then they are looked at again next time
                    fingerprint = runs.fingerprint()
                    if self._saved.get(token) == fingerprint:
                        continue
                    saved = self.keeper.save_runs(token, runs.kept_copy(self.kept_bytes), time.time())
                except RuntimeError:  # "changed size during iteration"
                    saved = None
                if saved is None:
                    self._failures[token] = self._failures.get(token, 0) + 1
                    if self._failures[token] == GIVE_UP_AFTER:
                        self.keeper.note("a browser's runs could not be saved (something in them cannot be written "
                                         "to a file); they stay in memory only")
                    if self._failures[token] >= GIVE_UP_AFTER:
                        self._saved[token] = fingerprint  # not tried again until they change
                    continue
                self._failures.pop(token, None)
                self._saved[token] = fingerprint
            known = {token for token, _, _ in kept}
            gone = [token for token in self._saved if token not in known]
            for token in gone:
                del self._saved[token]
            ended = [key for key, work in self._flights.items() if work.cancelled.is_set() or _ended_before(work, began)]
            for key in ended:
                del self._flights[key]
        self.keeper.forget_runs(gone)
        self._trim()
        self.keeper.flights_ended(ended)

    def _trim(self) -> None:
        """The whole file within total_bytes: the browsers saved longest ago leave it first."""
        sizes = self.keeper.run_sizes()  # least recently saved first
        total = sum(size for _, size, _ in sizes)
        drop = []
        for token, size, _seen in sizes:
            if total <= self.total_bytes:
                break
            drop.append(token)
            total -= size
        self.keeper.forget_runs(drop)

    def start(self) -> threading.Thread:
        me = weakref.ref(self)  # the thread ends with the saver (a test's room replaced by the next one)
        stop = self._stop

        def loop() -> None:
            while not stop.wait(SAVE_EVERY_S):
                saver = me()
                if saver is None or not saver.keeper.saving:
                    return
                try:
                    saver.tick()
                except Exception as exc:  # noqa: BLE001 - a bug here must not end the saving silently
                    saver.keeper.fail(f"saving the runs failed ({type(exc).__name__}: {str(exc)[:100]})")
                del saver

        thread = threading.Thread(target=loop, name="two-bends-room-saver", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
