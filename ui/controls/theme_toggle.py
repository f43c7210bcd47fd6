"""A dark theme for a dark room: the toggle (sidebar, presenter bar, link `theme=dark`), the page's dark style, the charts'.

Streamlit 1.67 cannot switch its own theme per session from Python (`[theme] base` in .streamlit/config.toml is
server-wide; `st.context.theme.type` only reports what the browser shows), so the dark look is a style sheet over
Streamlit's element test ids (checked in tests/browser/test_dark_theme.py with a real browser), and charts are
restyled by ui/figures/theme.py's `styled(fig, "dark")`.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.figures import theme

BG, PANEL, INK, MUTED, EDGE = theme.DARK_BACKGROUND, "#1B1F2A", theme.DARK_INK, "#B4BAC6", "#454B59"

DARK_STYLE = f"""
<style>
.stApp, header[data-testid="stHeader"], [data-testid="stMain"], [data-testid="stBottomBlockContainer"]
  {{ background-color: {BG} !important; color: {INK} !important; }}
section[data-testid="stSidebar"], section[data-testid="stSidebar"] > div {{ background-color: {PANEL} !important; }}
.stApp p, .stApp li, .stApp label, .stApp h1, .stApp h2, .stApp h3, .stApp h4, .stApp h5, .stApp summary,
.stApp [data-testid="stMetricValue"], .stApp [data-testid="stMetricLabel"], .stApp [data-testid="stText"],
.stApp [data-testid="stMarkdownContainer"], .stApp [data-testid="stWidgetLabel"], .stApp th, .stApp td
  {{ color: {INK} !important; }}
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p,
.stApp [data-testid="stMetricDelta"] {{ color: {MUTED} !important; }}
.stApp a, .stApp a p {{ color: #8AB4F8 !important; }}
.stApp input, .stApp textarea, .stApp [data-baseweb="input"], .stApp [data-baseweb="input"] > div,
.stApp [data-baseweb="textarea"], .stApp [data-baseweb="select"] > div, .stApp [data-baseweb="base-input"],
.stApp [data-testid="stNumberInputContainer"] button, [data-baseweb="popover"] > div, [data-baseweb="menu"],
[data-baseweb="popover"] li, [data-testid="stPopoverBody"]
  {{ background-color: {PANEL} !important; color: {INK} !important; border-color: {EDGE} !important; }}
.stApp [data-baseweb="select"] svg, .stApp [data-testid="stNumberInputContainer"] svg {{ fill: {INK} !important; }}
.stApp button[kind="secondary"], .stApp button[data-testid="stBaseButton-secondary"],
.stApp [data-testid="stPopover"] button {{ background-color: {PANEL} !important; color: {INK} !important;
  border-color: {EDGE} !important; }}
.stApp button[kind="tertiary"], .stApp button[data-testid="stBaseButton-tertiary"] {{ color: {INK} !important; }}
.stApp button:disabled, .stApp button:disabled p {{ color: #7D8494 !important; }}
.stApp [data-testid="stExpander"] details, .stApp [data-testid="stVerticalBlockBorderWrapper"],
.stApp [data-testid="stForm"] {{ border-color: {EDGE} !important; }}
.stApp [data-testid="stExpander"] summary:hover {{ background-color: {PANEL} !important; }}
.stApp code, .stApp pre {{ background-color: {PANEL} !important; color: #F5C98A !important; }}
.stApp [data-testid="stAlertContainer"] {{ background-color: #1E2A3D !important; }}
.stApp [data-testid="stAlertContainer"] * {{ color: {INK} !important; }}
.stApp [data-baseweb="tab"] p {{ color: {MUTED} !important; }}
.stApp [data-baseweb="tab"][aria-selected="true"] p {{ color: {INK} !important; }}
.stApp [data-testid="stDataFrame"] {{ filter: invert(0.92) hue-rotate(180deg); }}  /* a canvas: invert its light grid */
.stApp [data-testid="stImage"] img {{ background-color: #F4F1EA; border-radius: 6px; }}  /* line art keeps its paper */
.stApp [data-testid="stSidebarNav"] span, .stApp [data-testid="stSidebarNav"] a {{ color: {INK} !important; }}
.stApp [data-testid="stSidebarNav"] a[aria-current="page"] {{ background-color: #2C3240 !important; }}
</style>
"""


def dark() -> bool:
    """Is this session's look dark? A fresh session follows what the browser shows (st.context.theme.type)."""
    ss = st.session_state
    if state.DARK_THEME not in ss:
        ss[state.DARK_THEME] = _browser_is_dark()
    return bool(ss[state.DARK_THEME])


def _browser_is_dark() -> bool:
    try:
        return st.context.theme.type == "dark"
    except Exception:  # noqa: BLE001 — no browser behind this run (AppTest, bare mode): light
        return False


def mode() -> str:
    return theme.DARK if dark() else theme.LIGHT


def _flip() -> None:
    st.session_state[state.DARK_THEME] = not st.session_state.get(state.DARK_THEME, False)


def toggle() -> None:
    """The sidebar's switch (its value is the session's DARK_THEME; a link's theme=dark sets it)."""
    dark()
    st.toggle("Dark theme", key=state.DARK_THEME, help="For a dark room or a dim projector: dark pages and charts. "
              "A shared link keeps it (theme=dark).")


def button() -> None:
    """The presenter bar's switch: one compact button that flips the look."""
    on = dark()
    st.button("Light" if on else "Dark", key=state.THEME_SWITCH, on_click=_flip, type="tertiary",
              icon=":material/light_mode:" if on else ":material/dark_mode:",
              help="Switch to the light theme" if on else "Switch to the dark theme (for a dark room)")


def apply() -> None:
    """Every page: the dark style sheet while the dark theme is on (nothing otherwise)."""
    if dark():
        st.html(DARK_STYLE)


def styled(fig):
    """`fig` in this session's look (ui/figures/theme.py)."""
    return theme.styled(fig, mode())


def plotly_chart(fig, box=None, **kwargs) -> None:
    """st.plotly_chart (into `box`, a column, if given) of `fig` in this session's look, as wide as its container."""
    (box or st).plotly_chart(styled(fig), width="stretch", theme=None, **kwargs)
