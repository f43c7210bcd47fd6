"""The room's keeper: hands every change of the room to its file (ui/room/store.py) and reads the room back at start.

Streamlit-free. The Room (ui/room/registry.py) and its poll rounds (ui/room/polls.py) call it as things change: a
member joins, an answer is given, a round locks or is measured, the teacher changes a lock. When the file cannot be
used (damaged, locked by another program, read-only, a full disk) the keeper says so once, in one line in the
terminal, keeps the reason for the teacher's banner (`problem`), and writes nothing more: the room keeps working in
memory, and a restart after the fix saves again (what was saved before stays in the file).

Browsers' kept runs travel as pickles, read back with an unpickler that builds only the classes of this project,
NumPy and a few safe builtins (Python's "restricting globals"): the file is its owner's alone, and even so a
tampered file cannot make the dashboard run anything.
"""
from __future__ import annotations

import dataclasses
import io
import json
import pickle
import sys
import threading
import time
from pathlib import Path

from ui.room import polls
from ui.room.poll_experiments import Measured
from ui.room.registry import Member
from ui.room.store import FILE_NAME, Flight, RoomStore, SavedMember, SavedRound, StoreError, why

PICKLE_FUNCTIONS = {("copyreg", "_reconstructor"), ("_codecs", "encode"), ("numpy.core.multiarray", "_reconstruct"),
                    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                    ("numpy._core.multiarray", "scalar"), ("numpy._core.numeric", "_frombuffer"),
                    ("numpy.core.numeric", "_frombuffer")}
PICKLE_BUILTINS = {"set", "frozenset", "dict", "list", "tuple", "bytearray", "complex", "float", "int", "str",
                   "bytes", "bool", "slice", "range", "object"}
PICKLE_CLASSES = ("engine.", "ui.", "numpy", "collections", "datetime")  # classes of these modules may be built


AS_TEXT = {("torch.torch_version", "TorchVersion")}  # a str subclass in a run's environment: read back as plain text
# (no torch import in the dashboard's process for it)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in AS_TEXT:
            return str
        if (module == "builtins" and name in PICKLE_BUILTINS) or (module, name) in PICKLE_FUNCTIONS:
            return super().find_class(module, name)
        if module.startswith(PICKLE_CLASSES):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"a kept run may not hold {module}.{name}")


def dumps(obj) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(blob: bytes):
    return _Unpickler(io.BytesIO(blob)).load()


class Keeper:
    """The room's file, or the reason it is not being saved. Never raises: a failure turns the keeper off."""

    def __init__(self, data_dir: str | Path | None, say=None):
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.path = Path(data_dir) / FILE_NAME if data_dir else None
        self.store: RoomStore | None = None
        self.problem: str | None = None
        self._lock = threading.RLock()  # one use of the file at a time (the saver's thread, sessions, a clear)
        self.room = None  # the Room this keeper writes (set by load)
        self.notes: list[str] = []  # what could not be read back, one line each
        if self.path is None:
            self.problem = "the server was started without a data folder (start it with `two-bends dashboard --room`)"
            return
        try:
            self.store = RoomStore(self.path)
        except StoreError as exc:
            self.fail(str(exc))

    @property
    def saving(self) -> bool:
        return self.store is not None

    def fail(self, problem: str) -> None:
        """Saving stops here, said once (the terminal's line, the teacher's banner); the room goes on in memory."""
        with self._lock:
            if self.problem is None:
                self.problem = problem
                self.say(f"[room] the room is not being saved: {problem}. It keeps working in memory; fix it and "
                         "restart to save again.")
            self.close()

    def _do(self, fn, default=None):
        with self._lock:
            if self.store is None:
                return default
            try:
                return fn(self.store)
            except StoreError as exc:
                self.fail(str(exc))
            except Exception as exc:  # noqa: BLE001 - whatever else goes wrong with the file, the room goes on in memory
                self.fail(why(exc, self.path))
            return default

    def close(self) -> None:
        with self._lock:
            if self.store is not None:
                self.store.close()
                self.store = None

    # --- reading the room back --------------------------------------------------------------------------------
    def load(self, room, now: float | None = None) -> bool:
        """Fill `room` from the file (its codes, secret, decisions, members, poll rounds), or write `room` into a new
        file. True when a room was read back (a restart). The room's keeper is this one from now on."""
        now = time.time() if now is None else now
        room.keeper, self.room = self, room
        saved = self.saved_room()
        if saved is None:
            self.save_room(room, now)
            for member in room.snapshot():
                self.save_member(member)
            return False
        room.join_code, room.teacher_hash, room.secret = saved.join_code, saved.teacher_hash, saved.secret
        room.apply_settings(saved.settings)
        for m in self._do(lambda s: s.members(), []):
            room.add_saved_member(Member(m.member_id, m.name, m.role, m.joined, m.last_seen, m.page, browser=m.browser))
        self._read_rounds(room)
        if saved.starts > 1 or room.members or room.rounds:
            room.restarted_at = saved.started if saved.starts > 1 else now
        return True

    def _read_rounds(self, room) -> None:
        by_serial: dict[int, polls.Poll] = {}
        for r in self._do(lambda s: s.rounds(), []):
            try:
                question = polls.parse_question(json.loads(r.question), "saved")
            except (ValueError, polls.PollError) as exc:
                self.note(f"poll round {r.serial} could not be read back ({exc}); left out")
                continue
            earlier = [p for p in by_serial.values() if p.first_serial == r.first_serial and p.round < r.round]
            poll = polls.Poll(question, serial=r.serial, answers=dict(r.answers), open=r.open, revealed=r.revealed,
                              measured=Measured(**r.measured) if r.measured else None, opened=r.opened,
                              round=r.round, earlier=sorted(earlier, key=lambda p: p.round),
                              measured_at=r.measured_at, keeper=self)
            if r.measuring_since is not None:  # the server stopped while it measured: say so, keep the answers
                poll.interrupted = ("The measurement was still running when the room's server stopped: its answers "
                                    "stay as they were locked; press Measure again.")
                self.save_round(poll)
            by_serial[r.serial] = poll
            room.rounds.append(poll)
            if r.shown:
                room.poll = poll
        if by_serial:
            polls.serials_after(max(by_serial))

    # --- what the room hands over as it changes ----------------------------------------------------------------
    def saved_room(self):
        """The room as the file holds it (ui/room/store.py's SavedRoom), None when it holds none or cannot be read."""
        return self._do(lambda s: s.room())

    def write_room(self, join_code: str, teacher_hash: str, secret: bytes, settings: dict, now: float | None = None):
        self._do(lambda s: s.save_room(join_code, teacher_hash, secret, settings, time.time() if now is None else now))

    def save_room(self, room, now: float | None = None) -> None:
        self.write_room(room.join_code, room.teacher_hash, room.secret, room.settings(), now)

    def count_start(self, now: float | None = None) -> int | None:
        return self._do(lambda s: s.count_start(time.time() if now is None else now))

    def save_member(self, member) -> None:
        row = SavedMember(member.member_id, member.name, member.role, member.joined, member.last_seen, member.page,
                          member.browser)
        self._do(lambda s: s.save_member(row))

    def forget_members(self, member_ids: list[str]) -> None:
        self._do(lambda s: s.forget_members(list(member_ids)))

    def save_round(self, poll) -> None:
        with poll.lock:
            row = SavedRound(poll.serial, poll.first_serial, poll.round, poll.question.to_json(), poll.open,
                             poll.revealed, poll.measuring_since,
                             dataclasses.asdict(poll.measured) if poll.measured is not None else None,
                             poll.measured_at, poll.opened, shown=self.room is not None and self.room.poll is poll)
        self._do(lambda s: s.save_round(row))

    def save_answer(self, poll, member_id: str, index: int) -> None:
        self._do(lambda s: s.save_answer(poll.serial, member_id, index))

    def restart(self, room) -> None:
        """The room was cleared: its file is deleted from disk and a new one holds only the room (its new join code,
        the teacher code's hash, the teacher's decisions) and its teachers."""
        with self._lock:
            if self.store is None:
                return
            try:
                self.store.delete()
                self.store = RoomStore(self.path)
            except StoreError as exc:
                self.store = None
                self.fail(str(exc))
                return
        self.save_room(room)
        for member in room.snapshot():
            self.save_member(member)

    # --- browsers' kept runs and the work in flight -------------------------------------------------------------
    def saved_runs(self) -> list[tuple[str, object, float]]:
        """(token, runs, seen) of every browser in the file; a blob that cannot be read back is left out (noted)."""
        out = []
        for token, blob, seen in self._do(lambda s: s.runs(), []):
            try:
                out.append((token, loads(blob), seen))
            except Exception as exc:  # noqa: BLE001 - a damaged or foreign blob: that browser's runs are not read
                self.note(f"one browser's kept runs could not be read back ({str(exc)[:80]}); left out")
        return out

    def save_runs(self, token: str, runs, seen: float) -> int | None:
        """One browser's runs (already fitted to their budget by the caller): their size in bytes (0: the room is not
        being saved), None when they cannot be pickled (a lab result holding something live, or changing right now):
        that browser only, the room goes on being saved."""
        if self.store is None:
            return 0
        try:
            blob = dumps(runs)
        except Exception:  # noqa: BLE001 - see above; the saver retries and says so if it keeps failing
            return None
        self._do(lambda s: s.save_runs(token, blob, seen))
        return len(blob) if self.store is not None else 0

    def note(self, line: str) -> None:
        """Something the teacher should know about what is saved (shown on the console), once."""
        if line not in self.notes:
            self.notes.append(line)

    def forget_runs(self, tokens: list[str]) -> None:
        if tokens:
            self._do(lambda s: s.forget_runs(list(tokens)))

    def run_sizes(self) -> list[tuple[str, int, float]]:
        """(token, bytes, seen) of every browser in the file, the least recently seen first."""
        return self._do(lambda s: s.run_tokens(), [])

    def flights(self) -> list[Flight]:
        return self._do(lambda s: s.flights(), [])

    def flight_started(self, work_key: str, token: str, what: str, since: float | None = None) -> None:
        flight = Flight(work_key, token, what, time.time() if since is None else since)
        self._do(lambda s: s.flight_started(flight))

    def flights_ended(self, work_keys: list[str]) -> None:
        if work_keys:
            self._do(lambda s: s.flights_ended(list(work_keys)))
