"""The teacher console's parts: the room's notices, who is in it and what each has in the engine, cancel, remove a
student, locks, follow-me, the session's files after class, clear.

Drawn by pages/room/teacher_console.py (the teacher's only). The status refreshes itself every few seconds
(st.fragment(run_every=...)); it reads the Room (ui/room/registry.py) and the room's slots, where every session's
work in flight and the engine's own events about it are (ui/room/sessions.py): one source for the table and its
counts, never another session's page state.
"""
from __future__ import annotations

import time

import streamlit as st

from engine.core.trace_file import TraceFileError
from ui.engine_link import browser_runs, worker_link
from ui.room import config, current, export, follow, gate, polls, room_size, sessions
from ui.room.registry import LAB_POLICIES

REFRESH_S = 2.0
CANCEL_PICK, CANCEL_ONE, CANCEL_ALL = "room_cancel_pick", "room_cancel_one", "room_cancel_all"
REMOVE_PICK, REMOVE = "room_remove_pick", "room_remove"
FOLLOW_TOGGLE, LOCKS_FORM, CLEAR, CLEAR_SURE = "room_follow", "room_locks", "room_clear", "room_clear_sure"
CLEARED = "room_cleared"  # the last clear's outcome, in words (shown until the next one)
ROUNDS_CSV, RUNS_CSV, RUNS_FILE = "room_rounds_csv", "room_runs_csv", "room_runs_file"
LOCK_MODEL, LOCK_DEVICE, LOCK_DTYPE, LOCK_KERNELS = "room_lock_model", "room_lock_device", "room_lock_dtype", "room_lock_kernels"
LOCK_PROMPT, LOCK_OUTPUT, LOCK_LABS = "room_lock_prompt", "room_lock_output", "room_lock_labs"
TEACHERS = "the teacher's current choice"
FREE = "each student's choice"
LAB_WORDS = {"teacher": "teacher only", "all": "everyone", "none": "no one (labs paused)"}
NOT_HERE = "a browser not in the room now"


def notices() -> None:
    """Whether the room is being saved (and why not), the server's restart, what could not be read back."""
    keeper, room = current.keeper(), current.room()
    if keeper.problem:
        st.error(f"The room is not being saved: {keeper.problem}. Everything keeps working in memory, but a restart "
                 "would lose what happened since. Download the session's files below before you stop the server.",
                 icon=":material/save:")
    elif keeper.path is not None:
        st.caption(f"The room is saved as it happens in {keeper.path} (readable by you only): a restart with the same "
                   "command brings back the same code, the members, every round with its answers, and the runs.")
    if note := gate.restart_note(room):
        st.info(note, icon=":material/restart_alt:")
    for line in keeper.notes:
        st.warning(line)


def rows() -> tuple[list[dict], list[tuple[str, int, str]]]:
    """One row per member (name, role, page, state, request, queue wait), those with a tab open first, and the
    cancellable work: (session id, work id, words) for each request or job in the engine."""
    sessions.present()  # closed tabs forgotten first: their members show as away
    busy = sessions.in_the_engine()
    members = sorted(current.room().snapshot(), key=lambda m: (not m.connected, m.role != "teacher", m.joined))
    out, cancellable = [], []
    for m in members:
        mine = [busy[sid] for sid in sorted(m.sessions) if sid in busy]
        state = mine[0].state if mine else ("idle" if m.connected else "away")
        for item in mine:
            cancellable.append((item.session_id, item.work.id, f"{m.name}: {item.what}"))
        out.append({"name": m.name, "role": m.role, "page": m.page or "home", "state": state,
                    "request": ", ".join(i.what for i in mine), "queue wait": ", ".join(i.wait for i in mine),
                    "in the room": f"{(time.time() - m.joined) / 60:,.0f} min",
                    "last seen": "now" if m.connected else time.strftime("%H:%M", time.localtime(m.last_seen))})
    return out, cancellable


@st.fragment(run_every=REFRESH_S)
def status() -> None:
    table, cancellable = rows()
    states = [r["state"] for r in table]
    cols = st.columns(5)
    cols[0].metric("Connected", len(table) - states.count("away"))
    cols[1].metric("Away", states.count("away"), help="Joined, no tab open now: a reload brings them back without the code.")
    cols[2].metric("Waiting", states.count("waiting"))
    cols[3].metric("Running", states.count("running"))
    cols[4].metric("Lab jobs", states.count("lab"))
    st.dataframe(table, hide_index=True, width="stretch",
                 column_order=["name", "role", "page", "state", "request", "queue wait", "in the room", "last seen"])
    st.caption("Waiting, running and lab jobs count every session's work in the engine, yours too, as the engine "
               "reports it (started or not): the table and these counts come from the same place.")
    engine = worker_link.status()
    students = sum(r["role"] == "student" and r["state"] != "away" for r in table)
    size_line(students, engine.get("mode", "queue"))
    if engine.get("longest_slice_s"):
        st.caption(f"Longest lab slice so far: {engine['longest_slice_s']:,.2f} s. A lab yields between its points, "
                   "so a student's run waits behind a lab for at most one slice.")
    if not cancellable:
        st.caption("Nothing in flight: no run or job to cancel.")
        return
    labels = {f"{sid}:{wid}": words for sid, wid, words in cancellable}
    row = st.container(horizontal=True, vertical_alignment="bottom")
    pick = row.selectbox("Run or job in flight", list(labels), format_func=labels.get, key=CANCEL_PICK)
    if row.button("Cancel it", key=CANCEL_ONE, icon=":material/cancel:"):
        sid, wid = pick.rsplit(":", 1)
        done = sessions.cancel(sid, int(wid))
        st.toast(f"Cancelled: {labels[pick]}." if done else "It had already finished.")
    if row.button("Cancel everything in flight", key=CANCEL_ALL, icon=":material/block:"):
        n = sum(sessions.cancel_session(sid) for sid in {sid for sid, _, _ in cancellable})
        st.toast(f"Cancelled {n} run{'s' if n != 1 else ''} and job{'s' if n != 1 else ''}.")


def size_line(students: int, mode: str) -> None:
    """How many students this machine holds (measured here, or an estimate said to be one) against the room now."""
    level, words = room_size.line(_size(), students, mode)
    {"info": st.caption, "warning": st.warning, "error": st.error}[level](words)


@st.cache_data(ttl=60, show_spinner=False)
def _size() -> room_size.Size:
    return room_size.current()  # a file read: once a minute, not at every refresh of every console


def remove_student() -> None:
    """One student out of the room: its tabs go back to the join form, its browser's sign-in no longer admits it."""
    students = {m.member_id: m for m in current.room().snapshot() if m.role == "student"}
    if not students:
        st.caption("No student has joined yet.")
        return
    row = st.container(horizontal=True, vertical_alignment="bottom")
    pick = row.selectbox("Student", list(students), key=REMOVE_PICK,
                         format_func=lambda mid: students[mid].name + ("" if students[mid].connected else " (away)"))
    if row.button("Remove from the room", key=REMOVE, icon=":material/person_remove:"):
        for sid in current.room().remove(pick):
            sessions.drop_session(sid)
        st.toast(f"{students[pick].name} is out of the room: the code lets them back in (the sign-in no longer does).")


def locks(model_choices: dict) -> None:
    """The room's settings: what students may not change (model, device and dtype are always the teacher's)."""
    room = current.room()
    now = room.locks
    mode = worker_link.status().get("mode", "queue")
    with st.form(key=LOCKS_FORM, border=True):
        cols = st.columns(4)
        model = cols[0].selectbox("Model", [None, *model_choices], key=LOCK_MODEL,
                                  index=[None, *model_choices].index(now.model) if now.model in model_choices else 0,
                                  format_func=lambda v: TEACHERS if v is None else model_choices[v])
        device = cols[1].selectbox("Device", [None, "auto", "cpu", "cuda", "mps"], key=LOCK_DEVICE,
                                   index=[None, "auto", "cpu", "cuda", "mps"].index(now.device),
                                   format_func=lambda v: TEACHERS if v is None else v)
        dtype = cols[2].selectbox("Dtype", [None, "float32", "bfloat16", "float16"], key=LOCK_DTYPE,
                                  index=[None, "float32", "bfloat16", "float16"].index(now.dtype),
                                  format_func=lambda v: TEACHERS if v is None else v)
        kernels = cols[3].selectbox("Matmul kernels", [None, "fast", "plain"], key=LOCK_KERNELS,
                                    index=[None, "fast", "plain"].index(now.kernels),
                                    format_func=lambda v: FREE if v is None else v)
        cols = st.columns(3)
        prompt = cols[0].number_input("Maximum prompt tokens (0 = no cap)", 0, 1024, key=LOCK_PROMPT,
                                      value=now.max_prompt_tokens or 0, step=16)
        output = cols[1].number_input("Maximum output tokens (0 = no cap)", 0, 512, key=LOCK_OUTPUT,
                                      value=now.max_output_tokens or 0, step=16)
        labs = cols[2].radio("Who may run labs", LAB_POLICIES, key=LOCK_LABS, index=LAB_POLICIES.index(now.labs),
                             format_func=LAB_WORDS.get, horizontal=True)
        st.caption(f"Scheduling mode: **{mode}**. It is set when the server starts (`dashboard.sh --room --mode "
                   f"queue|batch`) and cannot change while the room runs: a restart with another mode keeps the "
                   f"room (code, members, rounds, runs) but ends the runs in flight, shown to their students as "
                   f"interrupted.")
        if st.form_submit_button("Apply to the room", type="primary"):
            try:
                room.set_locks(model=model, device=device, dtype=dtype, kernels=kernels,
                               max_prompt_tokens=prompt or None, max_output_tokens=output or None, labs=labs, mode=mode)
            except ValueError as exc:
                st.error(f"Not applied: {exc}.")
            else:
                st.success("Applied: students' pages use these settings from their next click (or push).")


def follow_me() -> None:
    """Students' pages follow the teacher's page and request settings while this is on."""
    room = current.room()
    on = st.toggle("Follow me: students' pages show my page and my request settings", key=FOLLOW_TOGGLE,
                   value=room.following()[1] is not None)
    _, shown_now = room.following()
    if on and shown_now is None:
        follow.push(room)
    elif not on and shown_now is not None:
        room.set_follow(None, None)
    _, shown_now = room.following()
    if shown_now is not None:
        shown = ", ".join(f"{k}={v}" for k, v in shown_now["params"].items()) or "the default settings"
        st.caption(f"Students follow **{shown_now['page']}** with {shown}. Open any page to take them there; "
                   "a student's page follows within a few seconds. Presenter mode stays each screen's own.")


def _class_runs() -> list[tuple[str, object]]:
    """(whose, trace) of every run the class's browsers keep, named by the member whose browser it is."""
    names = {m.browser: m.name for m in current.room().snapshot() if m.browser}
    return [(names.get(token, NOT_HERE), trace) for token, runs, _ in browser_runs.browsers().kept()
            for trace in runs.history]


def _session_file() -> bytes:
    try:
        return export.session_bytes(_class_runs(), title=f"The room's runs, {time.strftime('%Y-%m-%d %H:%M')}")
    except TraceFileError:
        return b""


def after_class() -> None:
    """The whole session as files: every poll round with its answers and results, and the class's runs (as CSV
    and as a session file the dashboard opens again). Each is built at the click, from the room as it is then."""
    room = current.room()
    rounds, runs = room.all_rounds(), _class_runs()
    answers = sum(sum(p.counts()) for p in rounds)
    st.caption(f"Now: {len(rounds)} poll round{'s' * (len(rounds) != 1)} with {answers} answer{'s' * (answers != 1)}, "
               f"{len(runs)} run{'s' * (len(runs) != 1)} kept by the class's browsers.")
    row = st.container(horizontal=True)
    row.download_button("Poll rounds and answers (CSV)", data=lambda: polls.to_csv(current.room().all_rounds()),
                        file_name="two_bends_room_rounds.csv", mime="text/csv", key=ROUNDS_CSV, on_click="ignore",
                        icon=":material/download:")
    row.download_button("The class's runs (CSV)", data=lambda: export.runs_csv(_class_runs()),
                        file_name="two_bends_room_runs.csv", mime="text/csv", key=RUNS_CSV, on_click="ignore",
                        icon=":material/download:")
    row.download_button("The class's runs (session file)", data=_session_file, disabled=not runs,
                        file_name="two_bends_room_session.json", mime="application/json", key=RUNS_FILE,
                        on_click="ignore", icon=":material/download:",
                        help="Opens again in the dashboard's sidebar (Open a session): every run, timings only.")


def _clear() -> None:
    """The button's callback (before the script runs): the room cleared, the box unticked, the outcome kept in
    this session so that it stays on screen through the console's later reruns."""
    sessions.present()  # closed tabs out first: the count says how many students were really in the room
    keep = sessions.teachers_browsers()
    room = current.room()
    gone = room.clear()  # a new join code; the keeper deletes the room's file and starts a new one
    for sid in gone:
        sessions.drop_session(sid)
    dropped = browser_runs.browsers().drop([t for t, _, _ in browser_runs.browsers().kept() if t not in keep])
    current.saver().forget(dropped)
    current.saver().restarted()
    keeper = current.keeper()
    disk = (f"deleted from this machine's disk ({keeper.path})" if keeper.saving else
            "gone from memory (the room was not being saved)")
    st.session_state[CLEAR_SURE] = False
    st.session_state[CLEARED] = (
        f"Cleared: {len(gone)} student session{'s' if len(gone) != 1 else ''} out of the room and their work cancelled; "
        f"the members, poll rounds, answers and the class's runs {disk}. The new join code is "
        f"{config.display(room.join_code)}: students type it to come back. Locks and "
        f"follow-me stay as they were. ({time.strftime('%H:%M:%S')})")


def clear_room() -> None:
    """Every student out, every round and run of the class deleted (from disk too); a new join code."""
    sure = st.checkbox("Yes, clear the room: students type a new code to come back; the members, every poll round "
                       "with its answers and the class's runs are deleted, from this machine's disk too",
                       key=CLEAR_SURE)
    st.button("Clear the room", key=CLEAR, icon=":material/logout:", disabled=not sure, on_click=_clear)
    if done := st.session_state.get(CLEARED):
        st.success(done)
