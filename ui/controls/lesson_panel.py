"""Lesson mode: a lesson's steps, one after another, above every page (in presenter mode under its bar).

A step is a page and the settings a shareable link carries (ui/demo/lesson.py reads and checks the files), so moving
to a step is opening its link in this session: its settings start from the defaults, its page opens, its run (or
Home's preset) starts once. The step lives in the URL (`?lesson=45-minutes&step=3&present=1`), so a reload or a shared
link lands on the same step. Back / Next are also the keys PageUp / PageDown (what a presentation clicker sends).
After the step's run, one line says whether it produced the lengths the step asked for, or why not.
"""
from __future__ import annotations

from functools import lru_cache

import streamlit as st

from ui import state
from ui.controls import demo_panel, widgets
from ui.demo import lesson as lessons_mod
from ui.demo import lesson_sheet, links, recorded
from ui.engine_link import worker_link

STYLE = """
<style>
.st-key-lesson_bar { gap: 0.3rem !important; border-bottom: 1px solid rgba(128, 128, 128, 0.35); padding-bottom: 0.2rem; }
.st-key-lesson_bar [data-testid="stMarkdownContainer"] p { font-size: 1.0rem !important; margin: 0 !important; }
.st-key-lesson_bar button p { font-size: 0.95rem !important; white-space: nowrap; }
.st-key-lesson_check [data-testid="stMarkdownContainer"] p { font-size: 0.95rem !important; }
</style>
"""

KEYS_SCRIPT = """
<div class="two-bends-lesson-keys"></div>
<script>
(() => {
  if (window.__twoBendsLessonKeys) return;  // one listener per browser tab; it presses the bar's current buttons
  window.__twoBendsLessonKeys = true;
  const skip = (el) => el && (el.isContentEditable || el.getAttribute("role") === "slider"
    || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || (el.tagName === "INPUT" && el.type !== "checkbox"));
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || skip(event.target)) return;
    const which = {PageDown: "lesson_next", PageUp: "lesson_back"}[event.key];
    if (!which) return;
    const target = document.querySelector(".st-key-" + which + " button");
    if (!target) return;  // no lesson on this page: the key scrolls as usual
    event.preventDefault();
    if (event.repeat || target.disabled) return;
    target.click();
  }, true);
})();
</script>
"""


@lru_cache(maxsize=4)
def _load(signature: tuple, pages: frozenset) -> tuple[dict, tuple[str, ...]]:
    found, problems = lessons_mod.load_all(pages=set(pages))
    return {lesson.name: lesson for lesson in found}, tuple(problems)


def _signature() -> tuple:
    """The lesson and poll files' names and change times: an edited file is read again, an unchanged one is not."""
    files = sorted(lessons_mod.LESSONS_DIR.glob("*.json")) + sorted(lessons_mod.POLLS_DIR.glob("*.json"))
    out = []
    for path in files:
        try:
            out.append((path.name, path.stat().st_mtime_ns))
        except OSError:
            continue
    return tuple(out)


def lessons(pages: list) -> tuple[dict, tuple[str, ...]]:
    """The lessons in assets/lessons/ (name -> Lesson), checked against `pages` (every page of the dashboard),
    and one line per file that was skipped."""
    return _load(_signature(), frozenset(links.page_path(p) for p in pages))


def current(found: dict):
    """(lesson, step number) being taught, or (None, 0)."""
    ss = st.session_state
    lesson = found.get(ss.get(state.LESSON))
    if lesson is None:
        return None, 0
    return lesson, min(max(int(ss.get(state.LESSON_STEP, 1)), 1), len(lesson.steps))


def _go(lesson, number: int) -> None:
    """Back / Next / Start (a callback: before the sidebar's widgets exist): open step `number` as its link."""
    ss = st.session_state
    step = lesson.steps[number - 1]
    link = links.parse(step.query(), {step.page}, recorded.shipped_names(), replay_only=recorded.replay_only())
    demo_panel.apply_link(link, fresh=True)
    demo_panel.start_step(lesson.name, number)
    ss[state.LESSON_SWITCH] = step.page  # route() opens it before the page draws
    if step.poll_id:
        ss[state.POLL_PICK] = step.poll_id  # the poll page opens with the step's question chosen


def _start(found: dict) -> None:
    lesson = found.get(st.session_state.get(state.LESSON_PICK))
    if lesson is not None:
        st.session_state[state.PRESENTER] = True
        _go(lesson, 1)


def _end() -> None:
    for key in (state.LESSON, state.LESSON_STEP, state.LESSON_STARTED):
        st.session_state.pop(key, None)


def route(current_page, pages: list) -> None:
    """Before anything is drawn: a Back / Next asked for another page; open it (or say why it cannot be opened)."""
    target = st.session_state.pop(state.LESSON_SWITCH, None)
    if target is None or target == links.page_path(current_page):
        return
    by_path = {links.page_path(p): p for p in pages}
    if target in by_path:
        ss = st.session_state
        for key in _sidebar_keys():  # this script run ends before the sidebar is drawn: Streamlit would drop its
            if key in ss:  # widgets' values as unused (presenter mode, the theme, the model...); set, they stay
                ss[key] = ss[key]
        st.switch_page(by_path[target])
    why = "replay-only mode has no labs" if recorded.replay_only() else "it is not open to this session"
    st.session_state[state.LINK_NOTICE] = f"This lesson step's page ({target}) cannot be shown here: {why}."


def _sidebar_keys() -> set[str]:
    """The keys of the widgets every page draws (the sidebar's, presenter mode, the theme)."""
    return set(widgets.defaults()) | {p.key for p in links.PARAMS.values()} | {state.PRESENTER, state.DARK_THEME}


def sidebar(found: dict, problems: tuple[str, ...]) -> None:
    """In the sidebar: pick a lesson and start it in presenter mode; one line per lesson file that was skipped."""
    with st.sidebar, st.expander("Lessons: a class, step by step", expanded=bool(problems)):
        for line in problems:
            st.warning(f"Lesson file skipped: {line}", icon=":material/error:")
        if not found:
            st.caption("No lesson in assets/lessons/ could be used.")
            return
        names = list(found)
        st.selectbox("Lesson", names, key=state.LESSON_PICK,
                     format_func=lambda n: f"{found[n].title} ({found[n].minutes:g} min, {len(found[n].steps)} steps)")
        st.button("Start it in presenter mode", key=state.LESSON_START, on_click=_start, args=(found,),
                  icon=":material/school:", width="stretch",
                  help="Opens step 1; Next / Back (or PageDown / PageUp) move through the steps. The step is in the "
                       "address bar: a reload, or the link shared, lands on the same step.")
        pick = found.get(st.session_state.get(state.LESSON_PICK)) or found[names[0]]
        _sheet_button(pick, key=state.LESSON_SHEET + "_sidebar")


def _sheet_button(lesson, key: str, label: str = "Teacher sheet (printable)") -> None:
    st.download_button(label, data=lambda: lesson_sheet.html(lesson), file_name=f"{lesson.name}-teacher-sheet.html",
                       mime="text/html", key=key, on_click="ignore", icon=":material/print:",
                       help="One page: every step's page, settings, poll and notes. Open it in a browser and print.")


def bar(pages: list):
    """Above the page while a lesson runs: the step, Back / Next, the notes, the sheet, End. Returns what check()
    needs (a place under the bar, the lesson, the step: the run is judged after the run panel ran it), or None."""
    found, problems = lessons(pages)
    if not st.session_state.get(state.PRESENTER):
        sidebar(found, problems)
    lesson, number = current(found)
    if lesson is None:
        return None
    step = lesson.steps[number - 1]
    st.html(STYLE)
    with st.container(key=state.LESSON_BAR, horizontal=True, vertical_alignment="center", gap="small"):
        st.markdown(f"**{lesson.title}** · step **{number} of {len(lesson.steps)}**: {step.title}", width="content")
        st.button("Back", key=state.LESSON_BACK, on_click=_go, args=(lesson, number - 1), disabled=number == 1,
                  icon=":material/skip_previous:", help="The step before (key: PageUp)")
        st.button("Next", key=state.LESSON_NEXT, on_click=_go, args=(lesson, number + 1),
                  disabled=number == len(lesson.steps), type="primary", icon=":material/skip_next:",
                  help="The next step: its page, its settings, its run (key: PageDown)")
        with st.popover("Notes", icon=":material/sticky_note_2:"):
            st.markdown(lesson_sheet.step_markdown(lesson, number))
        _sheet_button(lesson, state.LESSON_SHEET, "Sheet")
        st.button("End lesson", key=state.LESSON_END, on_click=_end, type="tertiary", icon=":material/close:")
    with st.container(key=state.LESSON_KEYS, height=1, border=False):
        st.html(KEYS_SCRIPT, unsafe_allow_javascript=True)
    return st.container(key=state.LESSON_CHECK), lesson, number


def check(shown) -> None:
    """Under the bar (`shown`: what bar() returned), once the step's run (its own, or its preset's) has finished:
    did it produce the lengths the step asked for, or why not."""
    if shown is None:
        return
    box, lesson, number = shown
    step, ss = lesson.steps[number - 1], st.session_state
    started = ss.get(state.LESSON_STARTED)
    trace = worker_link.store().last_trace
    shown_then = started[2]() if started and started[2] is not None else None
    if not step.runs or not started or started[:2] != (lesson.name, number) or trace is None or trace is shown_then:
        return  # the step runs nothing, or its run has not finished since the step opened
    asked = step.asked()
    if asked is None:  # a preset: the lengths it chose from this machine's rates
        preset = ss.get(state.PRESET_APPLIED)
        if preset is None or preset.verdict != step.settings.get(links.PRESET):
            return
        asked = (preset.prompt_tokens, preset.output_tokens, False)
    result = lessons_mod.check_run(trace, *asked)
    with box:
        (st.success if result.ok else st.warning)(f"This step: {result.text}",
                                                   icon=":material/check:" if result.ok else ":material/warning:")
