"""A browser's runs survive a refresh: a random token in a cookie keys its run history on the server.

The token (secrets.token_urlsafe, made by run_store.Browsers) is set by a tiny script and read back from
st.context.cookies; it is never in a link and never shown. Histories are bounded and expire (run_store.Browsers).
"""
from __future__ import annotations

import json
import threading
import time

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from engine.serving.scheduling.os_memory import release_free_memory
from ui import state
from ui.engine_link.run_store import Browsers, Runs

SWEEP_EVERY_S = 10.0  # how often browsers' kept runs are shrunk and expired
COOKIE = "two_bends_browser"  # the cookie holding this browser's token
COOKIE_MAX_AGE_S = 7 * 24 * 3600  # outlives the server's ABANDON_S: an expired token is simply replaced
COOKIE_SCRIPT = """<script>document.cookie = {cookie};</script>"""


def _sweep_forever(kept: Browsers) -> None:
    while True:
        time.sleep(SWEEP_EVERY_S)
        if Runtime.exists() and kept.sweep(Runtime.instance().is_active_session, time.monotonic()):
            release_free_memory(collect=True)  # what closed tabs' runs held goes back to the OS, not only to the heap


@st.cache_resource(show_spinner=False)
def browsers() -> Browsers:
    """Every browser's runs on this server (replay-only mode too: it needs no engine worker)."""
    kept = Browsers()
    threading.Thread(target=_sweep_forever, args=(kept,), name="two-bends-browsers", daemon=True).start()
    return kept


def this_browser() -> Runs:
    """The runs of the browser this session runs in, found by its cookie; a new token when it has none yet
    (set by `remember_browser`, in this session's sidebar)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return Runs()
    sent = sent_token()
    token, runs = browsers().visit(sent, ctx.session_id, time.monotonic())
    if token != sent:
        st.session_state[state.BROWSER_TOKEN_NEW] = token
    return runs


def sent_token() -> str | None:
    """The token this browser's cookie sent back with the page (None before the first visit)."""
    return st.context.cookies.get(COOKIE)


def set_cookie() -> None:
    """When this session gave its browser a new token: the tiny script that stores it in a cookie (no element
    shows; the token is never in the link)."""
    token = st.session_state.get(state.BROWSER_TOKEN_NEW)
    if not token:
        return
    cookie = json.dumps(f"{COOKIE}={token}; path=/; max-age={COOKIE_MAX_AGE_S}; SameSite=Strict")
    with st.container(key=state.BROWSER_COOKIE, height=1, border=False):
        st.html(COOKIE_SCRIPT.format(cookie=cookie), unsafe_allow_javascript=True)
