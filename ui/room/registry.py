"""Who is in the room and what the teacher decided: members, locks, follow-me. Streamlit-free and thread-safe.

One Room per server (ui/room/gate.py keeps it with st.cache_resource). Members are browser sessions, each with a
short anonymous name; the teacher's locks say what students may change (model, device and dtype are always the
teacher's: by default the teacher's current choice); `follow` is the page and link settings students' pages follow
when the teacher turns follow-me on, numbered so a student's page applies each push once. Clearing the room
evicts the students: their sessions must enter the code again.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

ADJECTIVES = ["Amber", "Blue", "Cedar", "Dusk", "Ember", "Fern", "Gold", "Hazel", "Iris", "Jade", "Kestrel", "Lime",
              "Moss", "North", "Olive", "Pine", "Quartz", "Rust", "Sage", "Teal", "Umber", "Violet", "Willow", "Zinc"]
ANIMALS = ["Heron", "Otter", "Lynx", "Finch", "Badger", "Crane", "Fox", "Hare", "Ibis", "Koi", "Marten", "Newt",
           "Owl", "Pika", "Robin", "Seal", "Tern", "Vole", "Wren", "Yak"]
LAB_POLICIES = ("teacher", "all", "none")  # who may start lab measurements
LENGTH_LIMIT = 100_000  # no lock on a length above this (a typo, not a decision)
SPEC_FIELDS = ("model", "device", "dtype", "kernels")


@dataclass
class Member:
    session_id: str
    name: str  # anonymous, shown on the teacher console
    role: str  # "student" or "teacher"
    joined: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.time)
    page: str = ""  # the page it last drew
    activity: str = "idle"  # "idle", "waiting", "running", "lab"
    request: str = ""  # what it runs or waits for, in words ("64 → 32 tokens")
    waiting_since: float | None = None


@dataclass
class Locks:
    """What students may not change. None in a field: students choose freely."""
    model: str | None = None
    device: str | None = None
    dtype: str | None = None
    kernels: str | None = None
    max_prompt_tokens: int | None = None
    max_output_tokens: int | None = None
    mode: str | None = None  # scheduling mode the teacher set ("queue" or "batch")
    labs: str = "teacher"  # one of LAB_POLICIES: lab jobs are the teacher's by default


class Room:
    def __init__(self):
        self.lock = threading.RLock()
        self.members: dict[str, Member] = {}
        self.locks = Locks()
        self.follow: dict | None = None  # {"page": ..., "params": {...}} while follow-me is on
        self.poll = None  # the open poll (ui/room/polls.py), if any
        self._names = itertools.count()
        self.follow_version = 0  # bumped at every change of `follow`: a student's page applies each version once
        self.teacher_spec: dict = {}  # the teacher's current model, device, dtype, kernels (its sidebar)
        self.teacher_page = ""  # the teacher's latest page other than the console (what follow-me shows)
        self.evicted: set[str] = set()  # sessions cleared out of the room: they must enter the code again

    def join(self, session_id: str, role: str) -> Member:
        """Add (or find) a session. An evicted student's session is not added back: it must enter the code again
        (ui/room/follow.py sends it to the join form); the member returned is then not in the room."""
        with self.lock:
            if session_id in self.evicted and role != "teacher":
                return Member(session_id, "", role)
            self.evicted.discard(session_id)
            member = self.members.get(session_id)
            if member is None:
                n = next(self._names)
                name = f"{ADJECTIVES[n % len(ADJECTIVES)]} {ANIMALS[(n // len(ADJECTIVES)) % len(ANIMALS)]}"
                member = self.members[session_id] = Member(session_id, name, role)
            member.role = role if role == "teacher" else member.role
            return member

    def member(self, session_id: str) -> Member | None:
        with self.lock:
            return self.members.get(session_id)

    def touch(self, session_id: str, **changes) -> None:
        with self.lock:
            member = self.members.get(session_id)
            if member is not None:
                for key, value in changes.items():
                    setattr(member, key, value)
                member.last_seen = time.time()

    def leave(self, session_id: str) -> None:
        with self.lock:
            self.members.pop(session_id, None)

    def keep_only(self, alive: set[str]) -> list[str]:
        """Drop members whose session is gone (the janitor's list of live sessions); returns who left."""
        with self.lock:
            gone = [sid for sid in self.members if sid not in alive]
            for sid in gone:
                del self.members[sid]
            return gone

    def snapshot(self) -> list[Member]:
        with self.lock:
            return sorted((Member(**vars(m)) for m in self.members.values()), key=lambda m: (m.role != "teacher", m.joined))

    def clear(self) -> list[str]:
        """The teacher clears the room: every student must enter the code again; locks and follow-me stay.
        Returns the evicted sessions (the caller cancels their work and drops their stores)."""
        with self.lock:
            gone = [sid for sid, m in self.members.items() if m.role != "teacher"]
            self.members = {sid: m for sid, m in self.members.items() if m.role == "teacher"}
            self.evicted.update(gone)
            self.poll = None
            return gone

    def is_evicted(self, session_id: str) -> bool:
        with self.lock:
            return session_id in self.evicted

    def readmit(self, session_id: str) -> None:
        """The evicted session was sent back to the join form: its next code admits it afresh."""
        with self.lock:
            self.evicted.discard(session_id)

    # --- locks ----------------------------------------------------------------------------------------------
    def set_locks(self, **changes) -> Locks:
        """Change some locks; raises ValueError with a clear reason for a value that makes no sense."""
        with self.lock:
            for key, value in changes.items():
                if not hasattr(self.locks, key):
                    raise ValueError(f"no lock called '{key}'")
                if key == "labs" and value not in LAB_POLICIES:
                    raise ValueError(f"labs must be one of {', '.join(LAB_POLICIES)}, not '{value}'")
                if key.startswith("max_") and value is not None:
                    if int(value) < 1 or int(value) > LENGTH_LIMIT:
                        raise ValueError(f"{key.replace('_', ' ')} must be between 1 and {LENGTH_LIMIT:,}")
                    value = int(value)
                setattr(self.locks, key, value)
            return Locks(**vars(self.locks))

    def student_spec(self, default: dict) -> dict:
        """Model, device, dtype and kernels a student's sidebar must hold: the teacher's lock, else the teacher's
        current choice, else `default` (the server's). Kernels stay the student's unless locked."""
        with self.lock:
            spec = {}
            for name in SPEC_FIELDS:
                locked = getattr(self.locks, name)
                if locked is not None:
                    spec[name] = locked
                elif name != "kernels":
                    spec[name] = self.teacher_spec.get(name, default.get(name))
            return {k: v for k, v in spec.items() if v is not None}

    def may_run_lab(self, role: str) -> bool:
        """Lab jobs: 'all' lets everyone, 'teacher' only the teacher (and solo), 'none' nobody."""
        with self.lock:
            policy = self.locks.labs
        return policy == "all" or (policy == "teacher" and role in ("teacher", "solo"))

    # --- follow-me ------------------------------------------------------------------------------------------
    def set_follow(self, page: str | None, params: dict | None) -> None:
        """Turn follow-me on (or update what students follow) with the teacher's page and link parameters;
        `page=None` turns it off. The version moves only when what students see changes."""
        with self.lock:
            new = None if page is None else {"page": page, "params": dict(params or {})}
            if new != self.follow:
                self.follow = new
                self.follow_version += 1

    def following(self) -> tuple[int, dict | None]:
        with self.lock:
            return self.follow_version, (None if self.follow is None else
                                         {"page": self.follow["page"], "params": dict(self.follow["params"])})

    def note_teacher(self, spec: dict, page: str) -> None:
        """The teacher's presence: its sidebar's model settings and its page (not the console)."""
        with self.lock:
            self.teacher_spec = dict(spec)
            if page:
                self.teacher_page = page
