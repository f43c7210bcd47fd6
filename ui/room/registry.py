"""Who is in the room and what the teacher decided: members, locks, follow-me. Streamlit-free and thread-safe.

One Room per server (ui/room/gate.py keeps it with st.cache_resource). Members are browser sessions, each with a
short anonymous name; the teacher's locks say what students may change; `follow` is the page and link settings
students' pages follow when the teacher turns follow-me on.
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

    def join(self, session_id: str, role: str) -> Member:
        with self.lock:
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

    def clear(self) -> None:
        """The teacher clears the room: every student must enter the code again; locks and follow-me stay."""
        with self.lock:
            self.members = {sid: m for sid, m in self.members.items() if m.role == "teacher"}
            self.poll = None
