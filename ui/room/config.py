"""Room mode's settings: on or off, the students' join code and the teacher's code (from the environment).

`scripts/dashboard.sh --room` (through ui/controls/launch.py) sets TWO_BENDS_ROOM=1 and, unless given, generates both
codes before Streamlit starts, so every session of the server reads the same ones. Codes are compared in constant
time (hmac.compare_digest): a wrong guess takes as long as a right one.
"""
from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass

ENV_ROOM, ENV_JOIN, ENV_TEACHER = "TWO_BENDS_ROOM", "TWO_BENDS_JOIN_CODE", "TWO_BENDS_TEACHER_CODE"
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud and typed from a projector
MAX_CODE_LEN = 64


@dataclass(frozen=True)
class RoomConfig:
    enabled: bool = False  # off: one person on one machine, every page and control open
    join_code: str = ""  # what a student types once per browser session
    teacher_code: str = ""  # opens the teacher console (and admits as teacher)


def new_code(length: int = 6) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(length))


def from_env(env=None) -> RoomConfig:
    env = os.environ if env is None else env
    if env.get(ENV_ROOM, "0") != "1":
        return RoomConfig()
    return RoomConfig(True, normalise(env.get(ENV_JOIN, "")), normalise(env.get(ENV_TEACHER, "")))


def normalise(code: str) -> str:
    """Codes are case-insensitive and ignore spaces and dashes (as read from a projector)."""
    return "".join(ch for ch in str(code).upper() if ch not in " -\t")


def matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an empty expected code never matches."""
    if not expected:
        return False
    return hmac.compare_digest(normalise(given)[:MAX_CODE_LEN].encode(), expected.encode())


def role_for(given: str, cfg: RoomConfig) -> str | None:
    """'teacher', 'student', or None for a wrong code (both comparisons always run)."""
    teacher, student = matches(given, cfg.teacher_code), matches(given, cfg.join_code)
    return "teacher" if teacher else "student" if student else None
