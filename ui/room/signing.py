"""The teacher code kept only as a salted hash, and the signed sign-in tokens that keep members in the room.

Streamlit-free. The hash is scrypt (hashlib) with a random salt, at the cost the scrypt paper gives for an
interactive login (N = 2^14, r = 8, p = 1: about 16 MB and tens of milliseconds), so the room file never holds the
teacher code itself. A sign-in token is `member.role.mac`: an HMAC-SHA256 of the member and role under the room's
secret (kept in the room file), so a browser can neither forge one nor turn a student's into a teacher's. A
teacher's token also signs the teacher code's hash: a new teacher code signs every teacher out.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from ui.room import config

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
SCRYPT_MAXMEM = 64 * 2**20
SALT_BYTES, HASH_BYTES, SECRET_BYTES = 16, 32, 32
MEMBER_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
ROLES = ("student", "teacher")


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def new_member_id() -> str:
    return secrets.token_urlsafe(18)  # 144 random bits, 24 characters


def _scrypt(code: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(config.normalise(code).encode(), salt=salt, n=n, r=r, p=p, maxmem=SCRYPT_MAXMEM,
                          dklen=HASH_BYTES)


def hash_code(code: str, salt: bytes | None = None) -> str:
    """'scrypt$N$r$p$salt$hash' (hex) of the normalised code; '' for no code."""
    if not config.normalise(code):
        return ""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(code, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def code_matches(given: str, stored: str) -> bool:
    """Whether `given` is the code whose hash is `stored` (constant-time comparison; '' or a malformed hash: never)."""
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        got = _scrypt(given[:4 * config.MAX_CODE_LEN], bytes.fromhex(salt), int(n), int(r), int(p))
        return hmac.compare_digest(got, bytes.fromhex(digest))
    except (ValueError, MemoryError):
        return False


def _mac(secret: bytes, member_id: str, role: str, teacher_hash: str) -> str:
    signed = f"{member_id}|{role}|{teacher_hash if role == 'teacher' else ''}".encode()
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def sign(secret: bytes, member_id: str, role: str, teacher_hash: str = "") -> str:
    return f"{member_id}.{role}.{_mac(secret, member_id, role, teacher_hash)}"


def read_token(secret: bytes, token: str | None, teacher_hash: str = "") -> tuple[str, str] | None:
    """(member id, role) of a token this room signed; None for anything else."""
    if not isinstance(token, str) or token.count(".") != 2:
        return None
    member_id, role, mac = token.split(".")
    if role not in ROLES or not MEMBER_ID.fullmatch(member_id):
        return None
    if not hmac.compare_digest(mac, _mac(secret, member_id, role, teacher_hash)):
        return None
    return member_id, role
