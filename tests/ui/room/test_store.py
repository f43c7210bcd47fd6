"""ui/room/store.py: the room's file. What is written comes back after a reopen (kill -9 included: each change is
committed at once), the file is its owner's alone, an older file is migrated and a newer or foreign one refused with
one line, and each storage fault (damaged file, another program's lock, a full disk, a read-only file) is a StoreError
of one line naming the file."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from ui.room import store
from ui.room.store import FILE_NAME, Flight, RoomStore, SavedMember, SavedRound, StoreError


def one_line(exc: StoreError, path: Path) -> str:
    text = str(exc)
    assert "\n" not in text and str(path) in text
    return text


def a_round(serial=1, **kw) -> SavedRound:
    fields = dict(serial=serial, first_serial=serial, round=1, question=json.dumps({"question": "Q?", "options": ["a", "b"]}),
                  open=True, revealed=False, measuring_since=None, measured=None, measured_at=None, opened=100.0)
    fields.update(kw)
    return SavedRound(**fields)


def test_what_is_written_comes_back_after_a_reopen(tmp_path):
    path = tmp_path / FILE_NAME
    s = RoomStore(path)
    s.save_room("BRIDGE", "scrypt$hash", b"k" * 32, {"locks": {"labs": "all"}}, now=50.0)
    s.save_member(SavedMember("m1", "Amber Heron", "student", 60.0, 61.0, "decode", "tok1"))
    s.save_round(a_round(1, open=False, revealed=True, measured={"value": 1.9, "text": "t", "key": "", "how": "h"},
                         measured_at=70.0))
    s.save_round(a_round(2, first_serial=1, round=2, shown=True))
    s.save_answer(1, "m1", 1)
    s.save_answer(2, "m1", 0)
    s.save_answer(2, "m1", 1)  # changed before the lock: the latest counts
    s.save_runs("tok1", b"blob", 80.0)
    s.flight_started(Flight("k1", "tok1", "64 → 32 tokens", 90.0))
    del s  # no close: as a kill -9 leaves it (every change was committed when it was made)

    again = RoomStore(path)
    room = again.room()
    assert (room.join_code, room.teacher_hash, room.secret, room.settings) == ("BRIDGE", "scrypt$hash", b"k" * 32,
                                                                               {"locks": {"labs": "all"}})
    assert room.starts == 1 and again.count_start(now=99.0) == 2 and again.room().started == 99.0
    assert again.members() == [SavedMember("m1", "Amber Heron", "student", 60.0, 61.0, "decode", "tok1")]
    first, second = again.rounds()
    assert first.answers == {"m1": 1} and first.measured["value"] == 1.9 and first.measured_at == 70.0
    assert not first.shown and second.shown and second.answers == {"m1": 1} and second.first_serial == 1
    assert again.runs() == [("tok1", b"blob", 80.0)]
    assert again.flights() == [Flight("k1", "tok1", "64 → 32 tokens", 90.0)]
    again.flights_ended(["k1"])
    again.forget_runs(["tok1"])
    again.forget_members(["m1"])
    assert again.flights() == [] and again.runs() == [] and again.members() == []


def test_only_one_round_is_shown(tmp_path):
    s = RoomStore(tmp_path / FILE_NAME)
    s.save_round(a_round(1, shown=True))
    s.save_round(a_round(2, shown=True))
    assert [r.shown for r in s.rounds()] == [False, True]


def test_the_file_is_its_owners_alone(tmp_path):
    folder = tmp_path / "data"
    s = RoomStore(folder / FILE_NAME)
    s.save_member(SavedMember("m1", "n", "student", 1.0, 1.0))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{folder / FILE_NAME}{suffix}")
        if part.exists():
            assert stat.S_IMODE(part.stat().st_mode) & 0o077 == 0, suffix
    s.close()
    os.chmod(folder / FILE_NAME, 0o644)  # made readable by others by hand: tightened at the next start
    RoomStore(folder / FILE_NAME).close()
    assert stat.S_IMODE((folder / FILE_NAME).stat().st_mode) == 0o600


def test_a_file_from_a_newer_version_is_refused_not_misread(tmp_path):
    path = tmp_path / FILE_NAME
    RoomStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError) as got:
        RoomStore(path)
    assert "newer Two Bends" in one_line(got.value, path)


def test_another_programs_database_is_refused(tmp_path):
    path = tmp_path / FILE_NAME
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(StoreError) as got:
        RoomStore(path)
    assert "not a Two Bends room file" in one_line(got.value, path)
    assert sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]  # untouched


def test_an_older_file_is_migrated_in_place(tmp_path, monkeypatch):
    """A version-2 dashboard opening this version's file: its migration runs once, the data stays."""
    path = tmp_path / FILE_NAME
    s = RoomStore(path)
    s.save_member(SavedMember("m1", "Amber Heron", "student", 1.0, 2.0))
    s.close()
    monkeypatch.setattr(store, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(store.MIGRATIONS, 2, ("ALTER TABLE members ADD COLUMN colour TEXT NOT NULL DEFAULT 'blue'",))
    migrated = RoomStore(path)
    assert migrated.conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert migrated.conn.execute("SELECT name, colour FROM members").fetchall() == [("Amber Heron", "blue")]


def test_a_damaged_file_is_one_line(tmp_path):
    path = tmp_path / FILE_NAME
    path.write_bytes(b"this is not a database, it is a shopping list " * 200)
    with pytest.raises(StoreError) as got:
        RoomStore(path)
    assert "damaged or not a database" in one_line(got.value, path)
    assert path.read_bytes().startswith(b"this is not a database")  # the user's file is never overwritten


def test_a_damaged_page_inside_a_good_file_is_one_line(tmp_path):
    path = tmp_path / FILE_NAME
    s = RoomStore(path)
    for i in range(200):
        s.save_member(SavedMember(f"m{i:04d}", "n" * 200, "student", 1.0, 1.0))
    s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    data = bytearray(path.read_bytes())
    data[4096 * 2: 4096 * 6] = b"\xff" * (4096 * 4)  # pages in the middle of the members' table
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as got:
        RoomStore(path).members()
    assert "damaged" in one_line(got.value, path)


def test_a_file_locked_by_another_program_is_one_line(tmp_path):
    path = tmp_path / FILE_NAME
    s = RoomStore(path, busy_timeout_s=0.2)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # e.g. a second dashboard writing, never letting go
    try:
        with pytest.raises(StoreError) as got:
            s.save_member(SavedMember("m1", "n", "student", 1.0, 1.0))
        assert "locked by another program" in one_line(got.value, path)
    finally:
        other.execute("ROLLBACK")
    s.save_member(SavedMember("m1", "n", "student", 1.0, 1.0))  # the lock gone, writing works again
    assert [m.member_id for m in s.members()] == ["m1"]


def test_a_full_disk_is_one_line_and_nothing_half_written(tmp_path):
    """SQLite's own limit on the file's pages stands in for the disk: the error is the one a full disk gives."""
    path = tmp_path / FILE_NAME
    s = RoomStore(path)
    s.save_runs("a", b"x" * 1000, 1.0)
    pages = s.conn.execute("PRAGMA page_count").fetchone()[0]
    s.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(StoreError) as got:
        s.save_runs("b", os.urandom(64 * 1024), 2.0)
    assert "is full" in one_line(got.value, path)
    assert [t for t, _, _ in s.runs()] == ["a"]  # the failed transaction left nothing behind
    s.save_member(SavedMember("m1", "n", "student", 1.0, 1.0))  # room for small writes still: the store is usable


def test_a_read_only_file_is_one_line(tmp_path):
    """chmod: as root (this machine's tests), permissions do not stop root, so the check runs as user nobody with
    the system Python (the store needs the standard library only)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    folder = Path(tempfile.mkdtemp(prefix="two-bends-ro-"))
    try:
        RoomStore(folder / FILE_NAME).close()
        shutil.copy(Path(store.__file__), folder / "room_store.py")
        os.chmod(folder / FILE_NAME, 0o400)
        user = None
        if os.geteuid() == 0:
            user = 65534
            os.chown(folder / FILE_NAME, user, -1)
            os.chown(folder, user, -1)
        os.chmod(folder, 0o555)  # the folder read-only too: no log file can be made beside it
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(folder)!r})
            from room_store import RoomStore, SavedMember, StoreError
            try:
                RoomStore({str(folder / FILE_NAME)!r}).save_member(SavedMember("m1", "n", "student", 1.0, 1.0))
                print("WROTE")
            except StoreError as exc:
                print("ERROR", exc)
        """)
        done = subprocess.run([python, "-c", script], user=user, capture_output=True, text=True, timeout=60, cwd="/")
        assert done.returncode == 0, done.stderr
        line = done.stdout.strip()
        assert line.startswith("ERROR") and "\n" not in line and str(folder / FILE_NAME) in line
        assert "cannot be written" in line or "cannot be opened" in line
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


@settings(max_examples=25, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(1, 3), hs.sampled_from(["m1", "m2", "m3"]), hs.integers(0, 1)), max_size=30))
def test_every_answer_given_is_read_back_as_the_latest_per_member_and_round(answers):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / FILE_NAME
        s = RoomStore(path)
        for serial in (1, 2, 3):
            s.save_round(a_round(serial))
        expected: dict[int, dict[str, int]] = {1: {}, 2: {}, 3: {}}
        for serial, member, option in answers:
            s.save_answer(serial, member, option)
            expected[serial][member] = option
        s.close()
        assert {r.serial: r.answers for r in RoomStore(path).rounds()} == expected


def test_default_folder_follows_the_platforms_convention(monkeypatch):
    assert store.default_dir({"XDG_DATA_HOME": "/x/data", "HOME": "/home/t"}) == Path("/x/data/two-bends")
    if sys.platform.startswith("linux"):
        assert store.default_dir({"HOME": "/home/t"}) == Path("/home/t/.local/share/two-bends")
