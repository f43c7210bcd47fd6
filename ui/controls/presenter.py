"""Presenter mode: big type for the back of the room, no sidebar, and the keyboard driving the show.

`apply()` (app.py) restyles every page while presenter mode is on and draws its own bar above it (every page, the
example and lengths, Run, the keys, the glossary: the sidebar is hidden); `keyboard(...)` (Decode and Prefill pages)
lets → / ← press the page's own Next / Previous buttons and space flip its Autoplay toggle, from a small script in the
page (same origin, it only clicks existing buttons: every state change still goes through Streamlit). `chart(...)`
draws a Plotly figure with PNG export, in the session's theme and, in presenter mode, larger type.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.controls import glossary_panel, theme_toggle, widgets
from ui.demo import recorded
from ui.figures import theme
from ui.text import prompts

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
.st-key-run_panel [data-testid="stExpander"] { display: block !important; }  /* a run in progress stays visible */
.st-key-presenter_bar { gap: 0.2rem !important; }  /* one row at 1280 px: every page, Run, keys, glossary, exit */
.st-key-presenter_bar [data-testid="stMarkdownContainer"] p { font-size: 0.95rem !important; white-space: nowrap; }
.st-key-presenter_bar button p, .st-key-presenter_bar [data-testid="stPageLink"] p { font-size: 0.95rem !important;
  white-space: nowrap; }
.st-key-presenter_bar button { padding-left: 0.55rem !important; padding-right: 0.55rem !important; }
.st-key-presenter_bar [data-testid="stPageLink"] a { padding-left: 0.3rem !important; padding-right: 0.3rem !important; }
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


# presenter mode's own copies of the sidebar's widgets (the sidebar stays drawn, hidden, so its keys keep their values)
MIRRORS = {state.PRESENTER_EXAMPLE: state.EXAMPLE, state.PRESENTER_PROMPT_TOKENS: state.PROMPT_TOKENS,
           state.PRESENTER_OUTPUT_TOKENS: state.MAX_NEW_TOKENS, state.PRESENTER_IGNORE_EOS: state.IGNORE_EOS}
KEYS_HINT = "**→ ← space**"  # on Prefill and Decode: next, previous, autoplay (keyboard() below)


def _copy(mirror: str) -> None:
    """A presenter control changed: the sidebar's setting follows (the example also fills the prompt box)."""
    ss = st.session_state
    ss[MIRRORS[mirror]] = ss[mirror]
    if mirror == state.PRESENTER_EXAMPLE:
        ss[state.PROMPT] = prompts.example(ss[mirror]).text


def apply(groups: dict, request=None) -> None:
    """While presenter mode is on: the large style and, above every page, a compact bar (the sidebar is hidden):
    every page of `groups` (app.py's navigation), the request's example and lengths, Run, the keys, the glossary
    and a way back. `request`: the sidebar's RunRequest (widgets.sidebar()); no Run controls in replay-only mode.
    Every page, presenting or not: the dark style while the dark theme is on."""
    theme_toggle.apply()
    if not active():
        return
    st.html(STYLE)
    with st.container(key=state.PRESENTER_BAR, horizontal=True, vertical_alignment="center", gap="small"):
        _navigation(groups)
        if request is not None and not recorded.replay_only():
            _request_controls(request)
        st.markdown(KEYS_HINT, width="content")
        glossary_panel.popover(kind="tertiary")
        theme_toggle.button()
        st.button("Exit", key=state.PRESENTER_LEAVE, on_click=_leave, type="tertiary", icon=":material/close:",
                  help="Leave presenter mode: the sidebar comes back")


def _navigation(groups: dict) -> None:
    """The first group's pages as links, each further group as a menu of its pages (grouped as in app.py; a group
    of one page is a link)."""
    for i, (group, pages) in enumerate(groups.items()):
        if i == 0 or len(pages) == 1:
            for page in pages:
                st.page_link(page, label=page.title.split(" — ")[0], width="content")
            continue
        with st.popover(group):
            for page in pages:
                st.page_link(page, label=page.title, icon=page.icon)


def _request_controls(request) -> None:
    """The example and the two lengths (in a popover that names them; typed, so 512 is one entry), and Run."""
    ss = st.session_state
    for mirror, key in MIRRORS.items():
        ss[mirror] = ss[key]  # follow the sidebar (a link, Reset, or the sidebar itself may have changed it)
    sent = request.n_prompt or ss[state.PROMPT_TOKENS]
    with st.popover(f"{sent} → {request.max_new_tokens}", icon=":material/tune:",
                    help="The request Run sends, in tokens: example prompt, prompt length and output length"):
        labels = {ex.key: ex.label for ex in prompts.examples()}
        st.selectbox("Example prompt", list(labels), format_func=labels.get, key=state.PRESENTER_EXAMPLE,
                     on_change=_copy, args=(state.PRESENTER_EXAMPLE,))
        fit = bool(ss.get(state.FIT_PROMPT, True))
        st.number_input("Prompt length N (tokens)", 1, prompts.PROMPT_TOKENS_MAX, key=state.PRESENTER_PROMPT_TOKENS,
                  on_change=_copy, args=(state.PRESENTER_PROMPT_TOKENS,), disabled=not fit,
                  help=None if fit else "The sidebar sends the prompt as typed; switch 'exactly N tokens' on there.")
        st.number_input("Output length (max new tokens)", 1, prompts.OUTPUT_TOKENS_MAX,
                  key=state.PRESENTER_OUTPUT_TOKENS, on_change=_copy, args=(state.PRESENTER_OUTPUT_TOKENS,))
        st.checkbox(widgets.EXACT_OUTPUT_LABEL, key=state.PRESENTER_IGNORE_EOS, on_change=_copy,
                    args=(state.PRESENTER_IGNORE_EOS,), help=widgets.EXACT_OUTPUT_HELP)
    st.button("Run", key=state.PRESENTER_RUN, type="primary", icon=":material/play_arrow:",
              disabled=request.lm is None, help=request.error)


def press_run(rest: str) -> None:
    """A page's empty state before any run: where Run is (the sidebar, or presenter mode's bar above), then `rest`."""
    if active():
        st.info(f"**Press Run above**{rest}", icon=":material/arrow_upward:")
    else:
        st.info(f"**Press Run in the sidebar**{rest}", icon=":material/arrow_back:")


def keyboard(next_key: str, prev_key: str, autoplay_key: str) -> None:
    """In presenter mode: → presses `next_key`'s button, ← `prev_key`'s, space flips the `autoplay_key` toggle."""
    if not active():
        return
    with st.container(key=state.PRESENTER_KEYS, height=1, border=False):
        st.html(KEYS_SCRIPT.format(next=next_key, prev=prev_key, play=autoplay_key), unsafe_allow_javascript=True)


def chart(fig, key: str, name: str, present_height: int | None = None) -> None:
    """A Plotly figure with a PNG download in its modebar (named `two_bends_<name>.png`), in the session's theme,
    larger when presenting. `present_height`: the figure's height in pixels when presenting (a page whose charts sit
    below its captions, on a 720 px projector)."""
    fig = theme_toggle.styled(fig)
    if active():
        fig = theme.enlarged(fig, FONT_SCALE)
        if present_height is not None:
            fig.update_layout(height=present_height)
    st.plotly_chart(fig, width="stretch", key=key, theme=None, config=theme.export_config(name))
