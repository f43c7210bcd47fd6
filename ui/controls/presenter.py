"""Presenter mode: big type for the back of the room, no sidebar, and the keyboard driving the show.

With ui/controls/widgets.py and ui/engine_link/worker_link.py, one of the modules in ui/ that import streamlit. `apply()` (app.py)
restyles every page while presenter mode is on; `keyboard(...)` (Decode and Prefill pages) lets → / ←
press the page's own Next / Previous buttons and space flip its Autoplay toggle, from a small script in
the page (same origin, it only clicks existing buttons: every state change still goes through Streamlit).
`chart(...)` draws a Plotly figure with PNG export (modebar camera) and, in presenter mode, larger type.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.figures import theme

FONT_SCALE = 1.3  # chart type in presenter mode, relative to the projector-sized default

# Streamlit 1.67's element test ids: checked in tests/browser/test_presenter.py with a real browser
STYLE = """
<style>
section[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
header[data-testid="stHeader"], [data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stExpander"] { display: none !important; }
[data-testid="stMainBlockContainer"] { padding: 0.6rem 1.6rem 2rem 1.6rem !important; max-width: 100% !important; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.5rem !important; line-height: 1.45 !important; }
[data-testid="stMain"] h1 { font-size: 2.3rem !important; padding: 0.2rem 0 0.4rem 0 !important; }
[data-testid="stMain"] h2, [data-testid="stMain"] h3 { font-size: 1.8rem !important; }
[data-testid="stMain"] [data-testid="stMetricValue"] p { font-size: 3rem !important; line-height: 1.15 !important;
  font-weight: 600 !important; }
[data-testid="stMain"] [data-testid="stMetricLabel"] p { font-size: 1.25rem !important; }
[data-testid="stMain"] button p { font-size: 1.3rem !important; }
[data-testid="stMain"] [data-testid="stText"] { font-size: 1.25rem !important; }
</style>
"""

KEYS_SCRIPT = """
<div class="two-bends-keys" data-next="{next}" data-prev="{prev}" data-play="{play}"></div>
<script>
(() => {{
  if (window.__twoBendsKeys) return;  // one listener per browser tab; it reads the current page's buttons
  window.__twoBendsKeys = true;
  const skip = (el) => el && (el.isContentEditable || el.getAttribute("role") === "slider"
    || el.tagName === "TEXTAREA" || el.tagName === "SELECT"
    || (el.tagName === "INPUT" && el.type !== "checkbox"));
  document.addEventListener("keydown", (event) => {{
    const keys = document.querySelector("div.two-bends-keys");
    if (!keys || event.altKey || event.ctrlKey || event.metaKey || skip(event.target)) return;
    const which = {{ArrowRight: "next", ArrowLeft: "prev", " ": "play"}}[event.key];
    if (!which) return;
    const scope = ".st-key-" + keys.dataset[which];
    const target = document.querySelector(which === "play" ? scope + " input" : scope + " button");
    if (!target || target.disabled) return;
    event.preventDefault();
    if (event.repeat && which === "play") return;
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    target.click();
  }}, true);
}})();
</script>
"""


def active() -> bool:
    return bool(st.session_state.get(state.PRESENTER, False))


def _leave() -> None:
    st.session_state[state.PRESENTER] = False


def apply(pages) -> None:
    """While presenter mode is on: the large style, links to the story `pages` (the sidebar with its navigation
    is hidden) and a way back."""
    if not active():
        return
    st.html(STYLE)
    row = st.columns([1] * len(pages) + [1.4], vertical_alignment="center")
    for col, page in zip(row, pages):
        col.page_link(page, label=page.title.split(" — ")[0])
    row[-1].button("✕ Leave presenter mode", key=state.PRESENTER_LEAVE, on_click=_leave, type="tertiary")


def keyboard(next_key: str, prev_key: str, autoplay_key: str) -> None:
    """In presenter mode: → presses `next_key`'s button, ← `prev_key`'s, space flips the `autoplay_key` toggle."""
    if not active():
        return
    with st.container(key=state.PRESENTER_KEYS, height=1, border=False):
        st.html(KEYS_SCRIPT.format(next=next_key, prev=prev_key, play=autoplay_key), unsafe_allow_javascript=True)


def chart(fig, key: str, name: str, width: str = "stretch") -> None:
    """A Plotly figure with a PNG download in its modebar (named `two_bends_<name>.png`), larger when presenting."""
    if active():
        fig = theme.enlarged(fig, FONT_SCALE)
    st.plotly_chart(fig, width=width, key=key, theme=None, config=theme.export_config(name))
