"""The demo kit's Streamlit pieces: save and open recorded runs, replay-only mode, the shareable link.

A recorded run (engine.core.trace_file checks it) is kept in the session's RunStore exactly like a fresh run, so every
page draws it; nothing here asks the engine worker for anything. The link: `restore` applies the URL's settings once
per session (before the sidebar's widgets exist), `publish` writes the current ones back after every run
(ui/demo/links.py checks and builds them).
"""
from __future__ import annotations

import re
import weakref

import streamlit as st

from engine.core.trace_file import MAX_FILE_BYTES, TraceFileError, read_trace, trace_bytes
from ui import state
from ui.controls import glossary_panel
from ui.demo import links, output_length, recorded, session_file
from ui.engine_link import worker_link
from ui.text import phase_numbers, prompts


def _message(kind: str, text: str) -> None:
    st.session_state[state.TRACE_MESSAGE] = (kind, text)


def _show(trace, label: str, shipped: str | None = None) -> None:
    worker_link.store().keep(trace, recorded=label)
    st.session_state[state.TRACE_SHOWN] = shipped
    _message("success", f"Showing the recorded run: {label}")


def open_shipped(name: str) -> bool:
    try:
        trace = recorded.load_shipped(name)
    except TraceFileError as exc:
        _message("error", f"Cannot open this recorded run: {exc}")
        return False
    _show(trace, recorded.label(trace, name), shipped=name)
    return True


def _open_chosen() -> None:
    name = st.session_state.get(state.TRACE_SHIPPED)
    if name:
        open_shipped(name)


def _read_upload(key: str, read, what: str):
    """The file in uploader `key` read by `read(data, name)` and its name (safe to show); None when there is none or
    it fails the checks (then the message says why and nothing else changes)."""
    upload = st.session_state.get(key)
    if upload is None:
        return None
    name = re.sub(r"[^\w. -]", "?", upload.name)[:80] or "the file"
    try:
        return read(upload.getvalue(), name), name
    except TraceFileError as exc:
        _message("error", f"Cannot open this {what}: {exc}")
        return None


def _open_upload() -> None:
    """The uploader's callback."""
    got = _read_upload(state.TRACE_UPLOAD, read_trace, "file")
    if got is not None:
        trace, name = got
        trace.settings.pop("model_spec", None)  # a recording never asks a model for anything
        _show(trace, recorded.label(trace, name))


def file_name(trace) -> str:
    model = re.sub(r"[^A-Za-z0-9]+", "-", trace.model).strip("-").lower()[:40] or "model"
    return f"two-bends-{model}-{trace.n_prompt}in-{trace.n_output}out.json"


def trace_download(trace, key: str, label: str = "Save this run (Trace JSON)") -> None:
    """A download of `trace` as a recorded-run file (built only when clicked); any page may offer one."""
    st.download_button(label, data=lambda: trace_bytes(trace), file_name=file_name(trace), mime="application/json",
                       key=key, on_click="ignore", icon=":material/download:",
                       help="Open it later with 'Open a recorded run', here or on any machine, with no model loaded; "
                            "`python -m engine show FILE` prints its summary.")


def _open_controls() -> None:
    shipped = recorded.shipped()
    if shipped:
        labels = {s.name: s.name.replace("-", " ") for s in shipped}
        st.selectbox("Recorded runs shipped with the dashboard", list(labels), format_func=labels.get,
                     key=state.TRACE_SHIPPED)
        st.button("Open this recorded run", key=state.TRACE_OPEN, on_click=_open_chosen, width="stretch")
    st.file_uploader("Open a recorded run (Trace JSON)", type=["json"], key=state.TRACE_UPLOAD, on_change=_open_upload,
                     max_upload_size=MAX_FILE_BYTES // 2**20,
                     help="A file saved with 'Save this run'. It is checked before use; nothing runs on the model.")
    message = st.session_state.get(state.TRACE_MESSAGE)
    if message:
        kind, text = message
        (st.error if kind == "error" else st.success)(phase_numbers.escape_markdown(text))


def _open_session() -> None:
    """The session uploader's callback: every run checked before any is used."""
    got = _read_upload(state.SESSION_UPLOAD, session_file.read_session, "session")
    if got is None:
        return
    traces, name = got
    store = worker_link.store()
    before = len(store.history)
    for trace in traces:
        trace.settings.pop("model_spec", None)  # a recording never asks a model for anything
        store.keep(trace, recorded=recorded.label(trace, name))
    st.session_state[state.TRACE_SHOWN] = None
    after = f", after the {before} already there" if before else ""
    _message("success", f"Opened {len(traces)} run{'s' * (len(traces) != 1)} from {name}: Timing compares them"
                        f"{after}; the pages show the newest.")


def session_controls() -> None:
    """Save every run of this browser's session in one file, or open such a file (its runs join the history)."""
    store = worker_link.store()
    if store.history:
        n = len(store.history)
        st.download_button(f"Save the whole session ({n} run{'s' * (n != 1)})", key=state.SESSION_DOWNLOAD,
                           data=lambda: session_file.session_bytes(store.history, store.last_trace),
                           file_name=session_file.file_name(store.history), mime="application/json",
                           on_click="ignore", icon=":material/save:",
                           help="Every run of the Timing page's comparison in one file; open it later with "
                                "'Open a session', here or on any machine, with no model loaded.")
    st.file_uploader("Open a session (all its runs)", type=["json"], key=state.SESSION_UPLOAD,
                     on_change=_open_session, max_upload_size=MAX_FILE_BYTES // 2**20,
                     help="A file saved with 'Save the whole session' (a single-run file opens too). Every run is "
                          "checked before any is used.")


def sidebar_section() -> None:
    """Below the Run button: presenter mode, then saving and opening recorded runs and whole sessions."""
    worker_link.remember_browser()
    st.toggle("Presenter mode (big type · keys ← → space)", key=state.PRESENTER,
              help="For a projector: no sidebar, large numbers and charts. On Decode and Prefill, → is the next "
                   "token, ← the previous one, space starts or stops autoplay.")
    with st.expander("Recorded runs: save or open"):
        trace = worker_link.store().last_trace
        if trace is not None:
            trace_download(trace, state.TRACE_DOWNLOAD)
        session_controls()
        _open_controls()


def replay_sidebar() -> None:
    """The whole sidebar in replay-only mode: recorded runs and presenter mode, no model, no Run button."""
    store = worker_link.store()
    if store.last_trace is None and recorded.shipped():
        open_shipped(recorded.shipped()[0].name)  # something to show at once
    with st.sidebar:
        worker_link.remember_browser()
        glossary_panel.popover()
        st.markdown("**Replay mode**: recorded runs only. No model is loaded on this machine; every page shows "
                    "the recorded run's own measurements.")
        _open_controls()
        session_controls()
        st.toggle("Presenter mode (big type · keys ← → space)", key=state.PRESENTER)
        if store.last_trace is not None:
            trace_download(store.last_trace, state.TRACE_DOWNLOAD)


def recorded_banner() -> None:
    """On the story pages: say that the run shown is a recording, and which; and how its output ended when that was
    not at the length asked (early, at the model's end-of-text: in presenter mode too) or went past the model's own
    end (a caption)."""
    store = worker_link.store()
    label, trace = store.recorded, store.last_trace
    if label and trace is not None:
        st.caption(f"Recorded run, not measured in this session: {phase_numbers.escape_markdown(label)}. Its numbers are "
                   "that machine's.")
    if trace is None:
        return
    if early := output_length.early_end(trace):
        st.info(early, icon=":material/front_hand:")
    elif past := output_length.past_end(trace):
        st.caption(past)


# --- The shareable link --------------------------------------------------------------------------------------------
LINK_PENDING, LINK_DONE = "pending", "done"  # state.LINK_RUN: the link's run=1 before and after it started


def restore(current, pages: list, lessons: dict | None = None) -> None:
    """On a session's first run: the URL's settings into session state, its recorded run opened, its page shown.
    `lessons`: the lessons that loaded (name -> ui.demo.lesson.Lesson); a link to a lesson's step opens that step
    (its page and settings, with the URL's own settings over them: a reload keeps what the teacher changed)."""
    ss = st.session_state
    if ss.get(state.LINK_RESTORED):
        return
    ss[state.LINK_RESTORED] = True
    lessons = lessons or {}
    by_path = {links.page_path(p): p for p in pages}
    query = st.query_params.to_dict()
    link = _parse(query, by_path, lessons)
    if link.lesson:
        query = {**lessons[link.lesson].steps[link.step - 1].query(), **query}
        link = _parse(query, by_path, lessons)
    apply_link(link)
    if link.lesson:
        start_step(link.lesson, link.step)
    if link.page and link.page != links.page_path(current):
        st.switch_page(by_path[link.page], query_params=query)


def _parse(query: dict, by_path: dict, lessons: dict) -> links.LinkSettings:
    return links.parse(query, set(by_path), recorded.shipped_names(), replay_only=recorded.replay_only(),
                       lessons={name: len(lesson.steps) for name, lesson in lessons.items()})


def apply_link(link: links.LinkSettings, fresh: bool = False) -> None:
    """A parsed link's settings into session state (before the sidebar's widgets exist: at the top of a script run,
    or in a callback). `fresh`: every link setting it leaves out goes back to its default first (a lesson's step
    starts from the defaults, whatever the step before it changed); presenter mode and the theme stay."""
    ss = st.session_state
    if fresh:
        ss.update({p.key: p.default for name, p in links.PARAMS.items() if name not in ("present", "theme")})
        for key in (state.LINK_RUN, state.LINK_PRESET, state.PRESET_PENDING):
            ss.pop(key, None)
    ss.update(link.values)
    if state.EXAMPLE in link.values:
        ss[state.PROMPT] = prompts.example(link.values[state.EXAMPLE]).text
    if link.trace:
        open_shipped(link.trace)
    if link.run:
        ss[state.LINK_RUN] = LINK_PENDING  # ui/controls/run_panel.py starts it once
    if link.preset:
        ss[state.PRESET_PENDING] = ss[state.LINK_PRESET] = link.preset  # Home's preset buttons run it once
    if link.notices:
        ss[state.LINK_NOTICE] = link.notice()


def start_step(lesson: str, step: int) -> None:
    """Remember the lesson step now shown, and the run shown when it opened (the step's own run is a newer one)."""
    ss = st.session_state
    ss[state.LESSON], ss[state.LESSON_STEP] = lesson, step
    shown = worker_link.store().last_trace  # held weakly: the store alone decides how long a run is kept
    ss[state.LESSON_STARTED] = (lesson, step, weakref.ref(shown) if shown is not None else None)


def publish(page) -> None:
    """The current settings into the URL (only what differs from the defaults), and any notice about the link."""
    ss = st.session_state
    notice = ss.pop(state.LINK_NOTICE, None)
    if notice:
        st.warning(notice, icon=":material/link_off:")
    values = {p.key: ss[p.key] for p in links.PARAMS.values() if p.key in ss}
    shown = ss.get(state.TRACE_SHOWN)
    if shown and not (worker_link.store().recorded and shown in recorded.shipped_names()):
        shown = None
    query = links.build(values, links.page_path(page), shown, run=state.LINK_RUN in ss, preset=ss.get(state.LINK_PRESET),
                        lesson=ss.get(state.LESSON), step=ss.get(state.LESSON_STEP))
    if query != st.query_params.to_dict():
        st.query_params.from_dict(query)
