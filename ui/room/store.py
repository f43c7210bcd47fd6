"""The room on disk: one SQLite file (the standard library's sqlite3, WAL mode) that a restarted server reads back.

Streamlit-free, and the only module that speaks SQL. What it keeps: the room (the join code, shown on the projector
anyway; the teacher code only as a salted hash; the key that signs members' sign-in cookies; locks, follow-me, lab
policy), its members (anonymous names, last seen), its poll rounds (question, state, the measured result and when)
with every answer, each browser's kept runs and lab results (a pickled blob, bounded by the caller), and the runs in
flight (so a restart shows them interrupted, never finished). ui/room/keeper.py decides what to write and when.

The file is its owner's alone (mode 0600, in a folder of mode 0700). Every change is its own transaction: a kill -9
loses nothing committed (WAL with synchronous=NORMAL survives a crash of the process; a power cut may lose the last
commits, never corrupt the file). The schema has a version (PRAGMA user_version) and an application id: a file from
an older version is migrated, one from a newer version or from another program is refused with one line, never read.
Any failure is a StoreError whose message is one line saying what is wrong with which file.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

FILE_NAME = "room.sqlite3"
APPLICATION_ID = 0x54776F42  # "TwoB": PRAGMA application_id marks the file as a Two Bends room
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 2.0  # how long a write waits for another program's lock before it gives up

# MIGRATIONS[v]: the statements that take a file from version v - 1 to version v (version 0: a new, empty file)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE room (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            join_code TEXT NOT NULL,
            teacher_hash TEXT NOT NULL,  -- ui/room/signing.py's salted hash, never the code
            secret BLOB NOT NULL,  -- signs the members' sign-in cookies
            settings TEXT NOT NULL,  -- JSON: locks, follow-me, the teacher's page and model settings
            created REAL NOT NULL,
            starts INTEGER NOT NULL DEFAULT 1,  -- how many times a server opened this room
            started REAL NOT NULL  -- when the latest of them opened it
        )""",
        """CREATE TABLE members (
            member_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            role TEXT NOT NULL,
            joined REAL NOT NULL,
            last_seen REAL NOT NULL,
            page TEXT NOT NULL DEFAULT '',
            browser TEXT NOT NULL DEFAULT ''  -- the token of its browser's kept runs (names them in the export)
        )""",
        """CREATE TABLE rounds (
            serial INTEGER PRIMARY KEY,
            first_serial INTEGER NOT NULL,  -- round 1 of the same question (a revote is a later round)
            round INTEGER NOT NULL,
            question TEXT NOT NULL,  -- the question file's JSON
            open INTEGER NOT NULL,
            revealed INTEGER NOT NULL,
            measuring_since REAL,
            measured TEXT,  -- JSON: value, text, key, how
            measured_at REAL,
            opened REAL NOT NULL,
            shown INTEGER NOT NULL DEFAULT 0  -- the round the room sees now
        )""",
        """CREATE TABLE answers (
            serial INTEGER NOT NULL REFERENCES rounds (serial) ON DELETE CASCADE,
            member_id TEXT NOT NULL,
            option INTEGER NOT NULL,  -- no time: nothing scores speed
            PRIMARY KEY (serial, member_id)
        )""",
        """CREATE TABLE runs (
            token TEXT PRIMARY KEY,  -- the browser's random token (its cookie)
            blob BLOB NOT NULL,
            bytes INTEGER NOT NULL,
            seen REAL NOT NULL
        )""",
        """CREATE TABLE in_flight (
            work_key TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            what TEXT NOT NULL,
            since REAL NOT NULL
        )""",
    ),
}


class StoreError(Exception):
    """The room file cannot be read or written; the message is one line."""


@dataclass
class SavedRoom:
    join_code: str
    teacher_hash: str
    secret: bytes
    settings: dict
    created: float
    starts: int
    started: float


@dataclass
class SavedMember:
    member_id: str
    name: str
    role: str
    joined: float
    last_seen: float
    page: str = ""
    browser: str = ""


@dataclass
class SavedRound:
    serial: int
    first_serial: int
    round: int
    question: str
    open: bool
    revealed: bool
    measuring_since: float | None
    measured: dict | None
    measured_at: float | None
    opened: float
    shown: bool = False
    answers: dict[str, int] = field(default_factory=dict)  # member id -> option index


@dataclass
class Flight:
    work_key: str
    token: str
    what: str  # the work in words ("64 → 32 tokens")
    since: float


def default_dir(env=None) -> Path:
    """The user's data folder: $XDG_DATA_HOME/two-bends, else ~/.local/share/two-bends (Linux and other Unix),
    ~/Library/Application Support/two-bends (macOS), %LOCALAPPDATA%\\two-bends (Windows)."""
    env = os.environ if env is None else env
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "two-bends"
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "two-bends"
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "two-bends"
    return home / ".local" / "share" / "two-bends"


def why(exc: BaseException, path: Path) -> str:
    """One line: what went wrong with the room file, in words a teacher can act on."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = text.lower()
    if isinstance(exc, StoreError):
        return text
    if "disk is full" in low or "no space" in low:
        return f"the disk holding {path} is full"
    if "readonly" in low or "read-only" in low or isinstance(exc, PermissionError):
        return f"{path} cannot be written (read-only file, folder or disk: {text})"
    if "locked" in low or "busy" in low:
        return f"{path} is locked by another program (a second dashboard with the same --data-dir?)"
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return f"{path} is damaged or not a database ({text}); move it away to start a new room file"
    if "unable to open" in low:
        return f"{path} cannot be opened (its folder is missing or not writable)"
    return f"{path}: {text}"


class RoomStore:
    """One room file, opened (made, migrated) at construction; StoreError (one line) when it cannot be used."""

    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = Path(path)
        self._lock = threading.RLock()
        self.conn: sqlite3.Connection | None = None
        try:
            self._open(busy_timeout_s)
        except (sqlite3.Error, OSError, ValueError, StoreError) as exc:
            self.close()
            raise StoreError(why(exc, self.path)) from None

    def _open(self, busy_timeout_s: float) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        mode = stat.S_IMODE(self.path.stat().st_mode)
        if mode & 0o077:  # readable by others: the owner's alone from now on (its own bits stay as they were)
            os.chmod(self.path, mode & 0o700)
        self.conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA foreign_keys = ON")
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]  # a file that is not SQLite fails here
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        tables = self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id != APPLICATION_ID and (app_id or version or tables):
            raise StoreError(f"{self.path} is not a Two Bends room file (another program's database?); "
                             "choose another --data-dir")
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer Two Bends (room file version {version}; this one "
                             f"reads up to {SCHEMA_VERSION}): update, or choose another --data-dir")
        if self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            raise StoreError(f"{self.path} cannot use a write-ahead log (its file system may not allow it)")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        if version < SCHEMA_VERSION:
            self._migrate(version)

    def _migrate(self, version: int) -> None:
        with self._transaction():
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    self.conn.execute(statement)
            self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _transaction(self):
        """One write transaction (taken at once: BEGIN IMMEDIATE), rolled back when anything in it fails."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException:
                try:
                    self.conn.execute("ROLLBACK")  # also after a failed COMMIT (a full disk), which leaves it open
                except sqlite3.Error:
                    pass
                raise

    def _run(self, fn):
        """Run `fn(conn)` under the lock; StoreError (one line) for any failure."""
        try:
            with self._lock:
                if self.conn is None:
                    raise StoreError(f"{self.path} is closed")
                return fn(self.conn)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(why(exc, self.path)) from None

    def _write(self, *statements: tuple[str, tuple]) -> None:
        """The statements as one transaction."""
        def go(conn):
            with self._transaction():
                for sql, args in statements:
                    conn.execute(sql, args)
        self._run(go)

    def close(self) -> None:
        """Close the file (under the lock: a connection closed while another thread uses it can crash the process)."""
        with self._lock:
            if self.conn is not None:
                try:
                    self.conn.close()
                except sqlite3.Error:
                    pass
                self.conn = None

    # --- the room -------------------------------------------------------------------------------------------
    def room(self) -> SavedRoom | None:
        row = self._run(lambda c: c.execute("SELECT join_code, teacher_hash, secret, settings, created, starts, "
                                            "started FROM room WHERE id = 1").fetchone())
        if row is None:
            return None
        return SavedRoom(row[0], row[1], bytes(row[2]), json.loads(row[3]), row[4], row[5], row[6])

    def save_room(self, join_code: str, teacher_hash: str, secret: bytes, settings: dict, now: float) -> None:
        """The room's codes and settings (made on the first call; its creation time and starts stay)."""
        self._write(("INSERT INTO room (id, join_code, teacher_hash, secret, settings, created, started) "
                     "VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET join_code = excluded.join_code, "
                     "teacher_hash = excluded.teacher_hash, secret = excluded.secret, settings = excluded.settings",
                     (join_code, teacher_hash, secret, json.dumps(settings), now, now)))

    def count_start(self, now: float) -> int:
        """A server opened this room again: the number of starts so far."""
        self._write(("UPDATE room SET starts = starts + 1, started = ? WHERE id = 1", (now,)))
        return self._run(lambda c: c.execute("SELECT starts FROM room WHERE id = 1").fetchone()[0])

    # --- members ----------------------------------------------------------------------------------------------
    def members(self) -> list[SavedMember]:
        rows = self._run(lambda c: c.execute("SELECT member_id, name, role, joined, last_seen, page, browser FROM members "
                                             "ORDER BY joined").fetchall())
        return [SavedMember(*row) for row in rows]

    def save_member(self, m: SavedMember) -> None:
        self._write(("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (m.member_id, m.name, m.role, m.joined, m.last_seen, m.page, m.browser)))

    def forget_members(self, member_ids: list[str]) -> None:
        self._write(*(("DELETE FROM members WHERE member_id = ?", (mid,)) for mid in member_ids))

    # --- poll rounds and their answers ------------------------------------------------------------------------
    def rounds(self) -> list[SavedRound]:
        def read(c):
            rounds = {row[0]: SavedRound(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]), row[6],
                                         json.loads(row[7]) if row[7] else None, row[8], row[9], bool(row[10]))
                      for row in c.execute("SELECT serial, first_serial, round, question, open, revealed, "
                                           "measuring_since, measured, measured_at, opened, shown FROM rounds "
                                           "ORDER BY serial")}
            for serial, member_id, option in c.execute("SELECT serial, member_id, option FROM answers"):
                rounds[serial].answers[member_id] = option
            return list(rounds.values())
        return self._run(read)

    def save_round(self, r: SavedRound) -> None:
        """A round's question and state (its answers are saved one by one: save_answer). Only one round is shown."""
        statements = [("UPDATE rounds SET shown = 0 WHERE serial != ?", (r.serial,))] if r.shown else []
        statements.append((
            "INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (serial) DO UPDATE SET "
            "open = excluded.open, revealed = excluded.revealed, measuring_since = excluded.measuring_since, "
            "measured = excluded.measured, measured_at = excluded.measured_at, shown = excluded.shown",
            (r.serial, r.first_serial, r.round, r.question, int(r.open), int(r.revealed), r.measuring_since,
             json.dumps(r.measured) if r.measured is not None else None, r.measured_at, r.opened, int(r.shown))))
        self._write(*statements)

    def save_answer(self, serial: int, member_id: str, option: int) -> None:
        self._write(("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (serial, member_id, option)))

    # --- browsers' runs and the work in flight ----------------------------------------------------------------
    def runs(self) -> list[tuple[str, bytes, float]]:
        """(token, blob, seen) of every browser, the most recently seen first."""
        return [(t, bytes(b), s) for t, b, s in self._run(
            lambda c: c.execute("SELECT token, blob, seen FROM runs ORDER BY seen DESC").fetchall())]

    def save_runs(self, token: str, blob: bytes, seen: float) -> None:
        self._write(("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)", (token, blob, len(blob), seen)))

    def forget_runs(self, tokens: list[str]) -> None:
        self._write(*(("DELETE FROM runs WHERE token = ?", (t,)) for t in tokens))

    def run_tokens(self) -> list[tuple[str, int, float]]:
        """(token, bytes, seen) of every kept browser, the least recently seen first."""
        return self._run(lambda c: c.execute("SELECT token, bytes, seen FROM runs ORDER BY seen").fetchall())

    def flights(self) -> list[Flight]:
        return [Flight(*row) for row in self._run(
            lambda c: c.execute("SELECT work_key, token, what, since FROM in_flight ORDER BY since").fetchall())]

    def flight_started(self, f: Flight) -> None:
        self._write(("INSERT OR REPLACE INTO in_flight VALUES (?, ?, ?, ?)", (f.work_key, f.token, f.what, f.since)))

    def flights_ended(self, work_keys: list[str]) -> None:
        self._write(*(("DELETE FROM in_flight WHERE work_key = ?", (k,)) for k in work_keys))

    # --- the whole file ---------------------------------------------------------------------------------------
    def delete(self) -> None:
        """Close the file and remove it from disk, with its write-ahead log and shared-memory index."""
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError as exc:
                raise StoreError(why(exc, self.path)) from None
