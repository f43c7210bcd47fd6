"""Room mode's settings: on or off, the codes the launcher fixed, where the room is saved (from the environment).

`two-bends dashboard --room` (through ui/controls/launch.py and ui/room/opening.py) sets TWO_BENDS_ROOM=1, reads or
makes the room's file in the data folder, and puts the join code and the teacher code's hash (ui/room/signing.py) in
the environment before Streamlit starts, so every session of the server reads the same ones. A plain teacher code in
the environment (a test, a server started without the launcher) is hashed when the room is made. Codes are compared
in constant time (hmac.compare_digest): a wrong guess takes as long as a right one.
"""
from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass

ENV_ROOM, ENV_JOIN, ENV_TEACHER = "TWO_BENDS_ROOM", "TWO_BENDS_JOIN_CODE", "TWO_BENDS_TEACHER_CODE"
ENV_URL = "TWO_BENDS_ROOM_URL"  # the room's address as students type it (set by ui/room/opening.py)
ENV_TEACHER_HASH = "TWO_BENDS_TEACHER_HASH"  # the teacher code's salted hash (ui/room/signing.py), set by the launcher
ENV_DATA_DIR = "TWO_BENDS_DATA_DIR"  # the folder of the room's file (--data-dir); unset: the room lives in memory only
ENV_NEW_CODE = "TWO_BENDS_NEW_CODE"  # 1: a new join code for the saved room (--new-code)
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud and typed from a projector
MIN_CODE_LEN = 4  # a shorter chosen code falls to guessing even at the throttle's pace (ui/room/throttle.py)
MAX_CODE_LEN = 64


@dataclass(frozen=True)
class RoomConfig:
    enabled: bool = False  # off: one person on one machine, every page and control open
    join_code: str = ""  # what a student types once per browser session
    teacher_code: str = ""  # opens the teacher console (and admits as teacher); "" when only its hash is known
    url: str = ""  # where students open the room (shown with its QR code); "" when the launcher did not say
    teacher_hash: str = ""  # the teacher code's salted hash, as the launcher passed it
    data_dir: str = ""  # where the room's file lives; "" when the room is not saved


def new_code(length: int = 6) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(length))


def from_env(env=None) -> RoomConfig:
    env = os.environ if env is None else env
    if env.get(ENV_ROOM, "0") != "1":
        return RoomConfig()
    return RoomConfig(True, normalise(env.get(ENV_JOIN, "")), normalise(env.get(ENV_TEACHER, "")),
                      env.get(ENV_URL, ""), env.get(ENV_TEACHER_HASH, ""), env.get(ENV_DATA_DIR, ""))


def normalise(code: str) -> str:
    """Codes are case-insensitive and ignore spaces and dashes (as read from a projector)."""
    return "".join(ch for ch in str(code).upper() if ch not in " -\t")


def problem(code: str, what: str = "code") -> str | None:
    """One line saying why a chosen code cannot be a room's code (None: it can)."""
    code = normalise(code)
    if len(code) < MIN_CODE_LEN:
        return f"the {what} needs at least {MIN_CODE_LEN} letters or digits (got {len(code)})"
    if len(code) > MAX_CODE_LEN:
        return f"the {what} may have at most {MAX_CODE_LEN} characters (got {len(code)})"
    return None


def display(code: str) -> str:
    """A code as the projector shows it: groups of three (ABC-DEF), which normalise() reads back as typed."""
    return "-".join(code[i:i + 3] for i in range(0, len(code), 3)) if len(code) <= 12 else code


def matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an empty expected code never matches."""
    if not expected:
        return False
    return hmac.compare_digest(normalise(given)[:MAX_CODE_LEN].encode(), expected.encode())
