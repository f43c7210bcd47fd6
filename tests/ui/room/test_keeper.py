"""ui/room/keeper.py: a Room handed to its keeper comes back whole from the file after a restart (members, codes,
decisions, every round with its answers and results, the round on screen), a measurement cut short says so, and
every storage fault turns saving off with one line while the room keeps working in memory."""
import os
import pickle
import sqlite3
import time

import pytest

from ui.room import polls, signing
from ui.room.keeper import Keeper, dumps, loads
from ui.room.registry import Room
from ui.room.store import FILE_NAME


def question(qid="double-the-prompt"):
    return next(q for q in polls.load_bank()[0] if q.id == qid)


def fresh(tmp_path, lines=None):
    keeper = Keeper(tmp_path, say=(lines.append if lines is not None else None))
    room = Room("BRIDGE", signing.hash_code("VALLEY9"))
    assert keeper.load(room) is False  # a new file: nothing read back
    return keeper, room


def restart(tmp_path):
    """What a restarted server does: a new keeper and a new Room, read back from the same file."""
    keeper = Keeper(tmp_path)
    room = Room("WRONG1", signing.hash_code("OTHER9"))  # the environment's codes lose to the file's
    assert keeper.load(room) is True
    return keeper, room


def test_a_room_comes_back_whole_after_a_restart(tmp_path):
    keeper, room = fresh(tmp_path)
    teacher, a, b = room.join("t", "teacher"), room.join("a", "student"), room.join("b", "student")
    room.touch("a", page="decode")
    room.set_locks(labs="all", max_output_tokens=64)
    room.set_follow("prefill", {"output_tokens": "64"})
    first = polls.Poll(question())
    room.open_poll(first)
    first.answer(a.member_id, 1)
    first.answer(b.member_id, 2)
    first.answer(b.member_id, 1)  # changed before the lock
    first.reveal()
    second = first.revote()
    room.open_poll(second)
    second.answer(a.member_id, 0)
    second.begin_measure(now=1000.0)
    second.end_measure(polls.Measured(1.9, "TTFT ×1.90", how="Measured on this engine"), now=1010.0)
    token = room.sign_in_token(a)
    del keeper, room  # kill -9: nothing closed, nothing flushed on the way out

    _, back = restart(tmp_path)
    assert back.join_code == "BRIDGE" and back.role_for("valley9") == "teacher" and back.role_for("other9") is None
    assert {m.member_id: (m.name, m.role) for m in back.snapshot()} == {
        m.member_id: (m.name, m.role) for m in (teacher, a, b)}
    assert back.present() == [] and back.members[a.member_id].page == "decode"  # away until a tab comes back
    assert back.returning(token).member_id == a.member_id  # its browser's cookie still signs it in
    assert back.locks.labs == "all" and back.locks.max_output_tokens == 64
    assert back.following() == (1, {"page": "prefill", "params": {"output_tokens": "64"}})
    r1, r2 = back.all_rounds()
    assert back.poll is r2 and r2.earlier == [r1] and r2.round == 2 and r2.first_serial == r1.serial
    assert r1.answers == {a.member_id: 1, b.member_id: 1} and r1.revealed and not r1.open
    assert r2.answers == {a.member_id: 0} and r2.measured.value == 1.9 and r2.measured_at == 1010.0
    assert r1.measured.value == 1.9  # a measurement answers the earlier rounds of its question too
    assert back.restarted_at is not None
    assert polls.Poll(question()).serial > r2.serial  # new rounds never reuse a saved round's serial


def test_an_open_round_reopens_and_a_measurement_cut_short_says_so(tmp_path):
    keeper, room = fresh(tmp_path)
    a = room.join("a", "student")
    open_round = polls.Poll(question())
    room.open_poll(open_round)
    open_round.answer(a.member_id, 2)
    _, back = restart(tmp_path)
    assert back.poll.open and back.poll.answer_of(a.member_id) == 2 and not back.poll.interrupted
    back.poll.answer(a.member_id, 0)  # answers still change: the round reopened
    back.poll.begin_measure()
    _, again = restart(tmp_path)
    cut = again.poll
    assert cut.answer_of(a.member_id) == 0 and not cut.open and cut.measuring_since is None
    assert "still running when the room's server stopped" in cut.interrupted and cut.measured is None


def test_clearing_deletes_the_class_from_disk_and_keeps_the_teacher(tmp_path):
    keeper, room = fresh(tmp_path)
    teacher, student = room.join("t", "teacher"), room.join("s", "student")
    room.open_poll(polls.Poll(question()))
    room.poll.answer(student.member_id, 1)
    room.clear()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert student.member_id.encode() not in on_disk and teacher.member_id.encode() in on_disk  # not just unlisted
    _, back = restart(tmp_path)
    assert [m.member_id for m in back.snapshot()] == [teacher.member_id]
    assert back.all_rounds() == [] and back.join_code == room.join_code != "BRIDGE"


class _FullDisk:
    """A connection whose writes fail as SQLite's do when the disk is full (SQLITE_FULL)."""

    def __init__(self, conn):
        self.conn = conn

    def execute(self, sql, *args):
        if sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "COMMIT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def close(self):
        self.conn.close()


def _corrupt(tmp_path):
    (tmp_path / FILE_NAME).write_bytes(os.urandom(8192))


@pytest.mark.parametrize("fault", ["damaged at start", "locked mid-session", "full disk mid-session",
                                   "read-only at start"])
def test_a_storage_fault_is_one_line_and_the_room_keeps_working(tmp_path, monkeypatch, fault):
    lines: list[str] = []
    other = None
    if fault == "damaged at start":
        _corrupt(tmp_path)
    if fault == "read-only at start":  # what SQLite does with a file it may not write: it opens it read-only
        Keeper(tmp_path).close()
        real = sqlite3.connect
        monkeypatch.setattr(sqlite3, "connect", lambda path, **kw: real(f"file:{path}?mode=ro", uri=True, **kw))
    keeper, room = (Keeper(tmp_path, say=lines.append), Room("BRIDGE", signing.hash_code("VALLEY9")))
    keeper.load(room)
    if fault == "locked mid-session":
        keeper.store.conn.execute("PRAGMA busy_timeout = 200")
        other = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
    if fault == "full disk mid-session":  # at the sqlite boundary: every write now gets a full disk's error
        keeper.store.conn = _FullDisk(keeper.store.conn)
    try:
        student = room.join("s", "student")
        poll = polls.Poll(question())
        room.open_poll(poll)
        began = time.monotonic()
        for i in range(3):
            poll.answer(student.member_id, i)  # after the first failure no write is even tried: no wait
        assert time.monotonic() - began < 1.0
    finally:
        if other is not None:
            other.execute("ROLLBACK")
    assert poll.answer_of(student.member_id) == 2 and room.member("s") is student  # in memory, all there
    assert not keeper.saving and keeper.problem
    assert len(lines) == 1 and lines[0].startswith("[room] the room is not being saved:") and "\n" not in lines[0]
    assert str(tmp_path / FILE_NAME) in lines[0]


def test_a_damaged_file_is_never_overwritten(tmp_path):
    _corrupt(tmp_path)
    before = (tmp_path / FILE_NAME).read_bytes()
    keeper, room = Keeper(tmp_path, say=lambda line: None), Room("BRIDGE")
    keeper.load(room)
    room.join("s", "student")
    room.clear()
    assert (tmp_path / FILE_NAME).read_bytes() == before and "damaged" in keeper.problem


def test_no_data_folder_means_memory_only_and_says_why():
    keeper = Keeper(None)
    room = Room("BRIDGE")
    keeper.load(room)
    room.join("s", "student")
    assert not keeper.saving and "without a data folder" in keeper.problem


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_kept_runs_read_back_build_only_this_projects_classes():
    assert loads(dumps({"x": [1, 2.0, "three"], "s": {1}})) == {"x": [1, 2.0, "three"], "s": {1}}
    with pytest.raises(pickle.UnpicklingError, match="may not hold"):
        loads(pickle.dumps(_Boom()))
