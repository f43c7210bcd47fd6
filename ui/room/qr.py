"""The room's address as a QR code (segno): in the terminal when the server starts, and as a picture on the page.

Streamlit-free. Error correction M (15 % of the code may be lost: a projector's glare, a phone held at an angle).
The terminal version uses Unicode half blocks (two modules per character row), drawn light-on-dark as most
terminals are; phones' camera apps read it either way round.
"""
from __future__ import annotations

import io

import segno

ERROR = "m"


def make(url: str) -> segno.QRCode:
    if not url:
        raise ValueError("a QR code needs the room's address")
    return segno.make(url, error=ERROR, micro=False)


def terminal(url: str, border: int = 2) -> str:
    """The code as text for a terminal (one line of characters per two rows of modules)."""
    out = io.StringIO()
    make(url).terminal(out=out, compact=True, border=border)
    return out.getvalue()


def png(url: str, scale: int = 8, dark: str = "#000000", light: str = "#ffffff") -> bytes:
    """The code as a PNG picture, `scale` pixels per module, with the standard quiet zone (4 modules)."""
    out = io.BytesIO()
    make(url).save(out, kind="png", scale=scale, dark=dark, light=light, border=4)
    return out.getvalue()
