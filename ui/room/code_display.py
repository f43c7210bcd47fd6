"""The room's join code on the page: its address, code and QR code for the teacher (console header, presenter mode).

Only the teacher ever sees it (a student already typed it; outside room mode there is nothing to join). The code is
the room's current one (*Clear the room* makes a new one). `header()` is the teacher console's first line;
`presenter_banner()` (app.py, one line) shows it LARGE above the page while presenter mode is on, for the back row
to read and phones to scan, until the teacher hides it.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.room import config, current, qr

BIG_STYLE = """
<style>
.st-key-room_code_banner [data-testid="stMarkdownContainer"] p { font-size: 1.6rem !important; }
.st-key-room_code_banner [data-testid="stMarkdownContainer"] code { font-size: 5rem !important; letter-spacing: 0.12em;
  padding: 0.1em 0.3em; }
</style>
"""


def _shown() -> config.RoomConfig | None:
    """The room's settings when this session may see its codes (room mode, the teacher); else None."""
    cfg = current.settings()
    return cfg if cfg.enabled and current.role() == "teacher" else None


@st.cache_data(show_spinner=False)
def _png(url: str, scale: int) -> bytes:
    return qr.png(url, scale=scale)


def header() -> None:
    """The teacher console's header line: where students go, the join code, and a small QR code."""
    cfg = _shown()
    if cfg is None:
        return
    with st.container(key=state.ROOM_CODE_HEADER, horizontal=True, vertical_alignment="center"):
        if cfg.url:
            st.image(_png(cfg.url, 4), width=120)
        st.markdown(f"Students open **{cfg.url or 'this page'}** and type the join code "
                    f"`{config.display(current.room().join_code)}`", width="content")


def _toggle() -> None:
    st.session_state[state.ROOM_CODE_SHOWN] = not st.session_state.get(state.ROOM_CODE_SHOWN, True)


def presenter_banner() -> None:
    """In presenter mode, the join code and QR code large above the page (a button hides and brings it back)."""
    cfg = _shown()
    if cfg is None or not st.session_state.get(state.PRESENTER, False):
        return
    if not st.session_state.get(state.ROOM_CODE_SHOWN, True):
        st.button("Show the join code", key=state.ROOM_CODE_TOGGLE, on_click=_toggle, type="tertiary",
                  icon=":material/qr_code_2:")
        return
    st.html(BIG_STYLE)
    with st.container(key=state.ROOM_CODE_BANNER, horizontal=True, vertical_alignment="center", gap="large"):
        if cfg.url:
            st.image(_png(cfg.url, 10), width=300)
        with st.container():
            st.markdown(f"Join the room: open **{cfg.url or 'this page'}**, then type")
            st.markdown(f"`{config.display(current.room().join_code)}`")
            st.button("Hide the join code", key=state.ROOM_CODE_TOGGLE, on_click=_toggle, type="tertiary",
                      icon=":material/visibility_off:")
