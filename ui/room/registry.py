"""Who is in the room and what the teacher decided: members, locks, follow-me, poll rounds. Streamlit-free, thread-safe.

One Room per server (ui/room/current.py). A member is one browser: a random id that its signed sign-in cookie keeps, a
short anonymous name, and the tabs (Streamlit sessions) it has open now; a member with no tab open is away, not gone: a
reload, or the server's restart, brings it back without the code. Model, device and dtype are always the teacher's (by
default the teacher's current choice); the other locks say what else students may not change. `follow` is numbered so a
student's page applies each push once. Every change is handed to the room's keeper (ui/room/keeper.py) as it happens.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from ui.room import config, signing

ADJECTIVES = ["Amber", "Blue", "Cedar", "Dusk", "Ember", "Fern", "Gold", "Hazel", "Iris", "Jade", "Kestrel", "Lime",
              "Moss", "North", "Olive", "Pine", "Quartz", "Rust", "Sage", "Teal", "Umber", "Violet", "Willow", "Zinc"]
ANIMALS = ["Heron", "Otter", "Lynx", "Finch", "Badger", "Crane", "Fox", "Hare", "Ibis", "Koi", "Marten", "Newt",
           "Owl", "Pika", "Robin", "Seal", "Tern", "Vole", "Wren", "Yak"]
LAB_POLICIES = ("teacher", "all", "none")  # who may start lab measurements
LENGTH_LIMIT = 100_000  # no lock on a length above this (a typo, not a decision)
SPEC_FIELDS = ("model", "device", "dtype", "kernels")
SEEN_EVERY_S = 60.0  # a member's "last seen" reaches the keeper at most this often (its page changes at once)


@dataclass
class Member:
    member_id: str  # random; the browser's signed sign-in cookie names it
    name: str  # anonymous, shown on the teacher console
    role: str  # "student" or "teacher"
    joined: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.time)
    page: str = ""  # the page it last drew
    sessions: set[str] = field(default_factory=set)  # its tabs open now (Streamlit session ids); none: away
    browser: str = ""  # the token of its browser's kept runs (ui/engine_link/run_store.py): whose runs are whose

    @property
    def connected(self) -> bool:
        return bool(self.sessions)


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


class NoKeeper:
    """A room kept in memory only: every change is dropped (a solo poll, a test)."""
    problem = None

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class Room:
    def __init__(self, join_code: str = "", teacher_hash: str = "", secret: bytes | None = None, keeper=None):
        self.lock = threading.RLock()
        self.join_code, self.teacher_hash = config.normalise(join_code), teacher_hash
        self.secret = secret or signing.new_secret()
        self.keeper = keeper or NoKeeper()
        self.members: dict[str, Member] = {}  # by member id
        self.by_session: dict[str, str] = {}  # session id -> member id
        self.locks = Locks()
        self.follow: dict | None = None  # {"page": ..., "params": {...}} while follow-me is on
        self.follow_version = 0  # bumped at every change of `follow`: a student's page applies each version once
        self.teacher_spec: dict = {}  # the teacher's current model, device, dtype, kernels (its sidebar)
        self.teacher_page = ""  # the teacher's latest page other than the console (what follow-me shows)
        self.poll = None  # the round the room sees now (ui/room/polls.py), if any
        self.rounds: list = []  # every poll round of this room, oldest first
        self.evicted: set[str] = set()  # sessions cleared out of the room: they must enter the code again
        self.restarted_at: float | None = None  # when a restarted server read this room back from its file
        self._seen_kept: dict[str, float] = {}  # member id -> when its last_seen last went to the keeper

    # --- codes and sign-in ----------------------------------------------------------------------------------
    def role_for(self, given: str) -> str | None:
        """'teacher', 'student', or None for a wrong code (both comparisons always run)."""
        with self.lock:
            join_code, teacher_hash = self.join_code, self.teacher_hash
        teacher = signing.code_matches(given, teacher_hash)
        student = config.matches(given, join_code)
        return "teacher" if teacher else "student" if student else None

    def sign_in_token(self, member: Member) -> str:
        """What the member's browser keeps (a cookie) to come back without the code."""
        return signing.sign(self.secret, member.member_id, member.role, self.teacher_hash)

    def returning(self, token: str | None) -> Member | None:
        """The member a browser's sign-in token names, when this room signed it and the member is still in it."""
        got = signing.read_token(self.secret, token, self.teacher_hash)
        if got is None:
            return None
        with self.lock:
            member = self.members.get(got[0])
            return member if member is not None and member.role == got[1] else None

    # --- members --------------------------------------------------------------------------------------------
    def _new_name(self) -> str:
        taken = {m.name for m in self.members.values()}
        n = len(self.members)
        while True:
            name = f"{ADJECTIVES[n % len(ADJECTIVES)]} {ANIMALS[(n // len(ADJECTIVES)) % len(ANIMALS)]}"
            if name not in taken or n > len(ADJECTIVES) * len(ANIMALS) * 4:
                return name
            n += 1

    def join(self, session_id: str, role: str, member_id: str | None = None) -> Member:
        """Add a session to the room: to its member (this session's, or `member_id`'s when it is in the room), else
        to a new member. An evicted student's session is not added back: it must enter the code again (ui/room/
        follow.py sends it to the join form); the member returned is then not in the room."""
        with self.lock:
            if session_id in self.evicted and role != "teacher":
                return Member("", "", role)
            self.evicted.discard(session_id)
            before = self.members.get(self.by_session.get(session_id, ""))
            member = before or self.members.get(member_id or "")
            if member is None or member.role != role:  # a new member (a student who typed the teacher code too)
                member = Member(signing.new_member_id(), self._new_name(), role)
                self.members[member.member_id] = member
                self.keeper.save_member(member)
                self._seen_kept[member.member_id] = member.last_seen
            if before is not None and before is not member:
                before.sessions.discard(session_id)
            member.sessions.add(session_id)
            self.by_session[session_id] = member.member_id
            return member

    def member(self, session_id: str) -> Member | None:
        with self.lock:
            return self.members.get(self.by_session.get(session_id, ""))

    def touch(self, session_id: str, page: str | None = None, browser: str | None = None) -> None:
        """The session drew a page: its member was seen now (kept on disk when the page or browser changed, or once
        a minute)."""
        with self.lock:
            member = self.members.get(self.by_session.get(session_id, ""))
            if member is None:
                return
            now = time.time()
            moved = (page is not None and page != member.page) or (browser is not None and browser != member.browser)
            member.last_seen, member.page = now, member.page if page is None else page
            member.browser = member.browser if browser is None else browser
            if moved or now - self._seen_kept.get(member.member_id, 0.0) >= SEEN_EVERY_S:
                self._seen_kept[member.member_id] = now
                self.keeper.save_member(member)

    def keep_only(self, alive: set[str]) -> list[str]:
        """Forget the sessions (tabs) not in `alive` (the live sessions); their members stay, away. Returns them."""
        with self.lock:
            gone = [sid for sid in self.by_session if sid not in alive]
            for sid in gone:
                member = self.members.get(self.by_session.pop(sid))
                if member is not None:
                    member.sessions.discard(sid)
            return gone

    def snapshot(self) -> list[Member]:
        """Every member (copies), the teachers first, then by when they joined."""
        with self.lock:
            copies = [replace(m, sessions=set(m.sessions)) for m in self.members.values()]
        return sorted(copies, key=lambda m: (m.role != "teacher", m.joined))

    def present(self) -> list[Member]:
        """The members with a tab open now."""
        return [m for m in self.snapshot() if m.connected]

    def _evict(self, member_ids: list[str]) -> list[str]:
        gone = []
        for mid in member_ids:
            member = self.members.pop(mid, None)
            if member is not None:
                gone += sorted(member.sessions)
                for sid in member.sessions:
                    self.by_session.pop(sid, None)
        self.evicted.update(gone)
        return gone

    def remove(self, member_id: str) -> list[str]:
        """The teacher removes one student: its tabs go back to the join form and its sign-in no longer admits it.
        Returns the sessions sent out."""
        with self.lock:
            member = self.members.get(member_id)
            if member is None or member.role == "teacher":
                return []
            gone = self._evict([member_id])
            self.keeper.forget_members([member_id])
            return gone

    def clear(self) -> list[str]:
        """The teacher clears the room: every student is out (they need the code again, a new one), the poll rounds
        are gone; locks, follow-me and the teacher stay. Returns the evicted sessions (the caller cancels their work
        and drops their stores); the keeper deletes the room's file and starts a new one."""
        with self.lock:
            gone = self._evict([mid for mid, m in self.members.items() if m.role != "teacher"])
            self.poll, self.rounds = None, []
            self.join_code = config.new_code(6)
            self.keeper.restart(self)
            return gone

    def is_evicted(self, session_id: str) -> bool:
        with self.lock:
            return session_id in self.evicted

    def readmit(self, session_id: str) -> None:
        """The evicted session was sent back to the join form: its next code admits it afresh."""
        with self.lock:
            self.evicted.discard(session_id)

    # --- poll rounds ----------------------------------------------------------------------------------------
    def open_poll(self, poll) -> None:
        """`poll` becomes the round the room sees (a new question, or a revote's new round)."""
        with self.lock:
            poll.keeper = self.keeper
            self.poll = poll
            if poll not in self.rounds:
                self.rounds.append(poll)
        self.keeper.save_round(poll)

    def all_rounds(self) -> list:
        with self.lock:
            return list(self.rounds)

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
            self.keeper.save_room(self)
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

    # --- follow-me ------------------------------------------------------------------------------------------
    def set_follow(self, page: str | None, params: dict | None) -> None:
        """Turn follow-me on (or update what students follow) with the teacher's page and link parameters;
        `page=None` turns it off. The version moves only when what students see changes."""
        with self.lock:
            new = None if page is None else {"page": page, "params": dict(params or {})}
            if new != self.follow:
                self.follow = new
                self.follow_version += 1
                self.keeper.save_room(self)

    def following(self) -> tuple[int, dict | None]:
        with self.lock:
            return self.follow_version, (None if self.follow is None else
                                         {"page": self.follow["page"], "params": dict(self.follow["params"])})

    def note_teacher(self, spec: dict, page: str) -> None:
        """The teacher's presence: its sidebar's model settings and its page (not the console)."""
        with self.lock:
            changed = dict(spec) != self.teacher_spec or (page and page != self.teacher_page)
            self.teacher_spec = dict(spec)
            if page:
                self.teacher_page = page
            if changed:
                self.keeper.save_room(self)

    # --- what the keeper writes and reads back ---------------------------------------------------------------
    def settings(self) -> dict:
        """The teacher's decisions, as the room's file keeps them (JSON)."""
        with self.lock:
            return dict(locks=vars(self.locks).copy(), follow=self.follow, follow_version=self.follow_version,
                        teacher_spec=dict(self.teacher_spec), teacher_page=self.teacher_page)

    def apply_settings(self, saved: dict) -> None:
        """The decisions read back from the room's file (what this version does not know is ignored)."""
        with self.lock:
            known = {k: v for k, v in (saved.get("locks") or {}).items() if hasattr(self.locks, k)}
            self.locks = Locks(**known)
            if self.locks.labs not in LAB_POLICIES:
                self.locks.labs = "teacher"
            self.follow = saved.get("follow") if isinstance(saved.get("follow"), dict) else None
            self.follow_version = int(saved.get("follow_version") or 0)
            self.teacher_spec = dict(saved.get("teacher_spec") or {})
            self.teacher_page = str(saved.get("teacher_page") or "")

    def add_saved_member(self, member: Member) -> None:
        """A member read back from the room's file (away until one of its tabs comes back)."""
        with self.lock:
            self.members[member.member_id] = member
            self._seen_kept[member.member_id] = member.last_seen
