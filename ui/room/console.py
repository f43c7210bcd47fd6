"""The teacher console's parts: who is in the room and what each waits for, cancel, locks, follow-me, clear.

Drawn by pages/room/teacher_console.py (the teacher's only). The status refreshes itself every few seconds
(st.fragment(run_every=...)); it reads the Room (ui/room/registry.py) and every session's work in flight
(ui/engine_link/worker_link.py), never another session's page state.
"""
from __future__ import annotations

import time

import streamlit as st

from ui.engine_link import worker_link
from ui.room import current, follow, sessions
from ui.room.registry import LAB_POLICIES

REFRESH_S = 2.0
CANCEL_PICK, CANCEL_ONE, CANCEL_ALL = "room_cancel_pick", "room_cancel_one", "room_cancel_all"
FOLLOW_TOGGLE, LOCKS_FORM, CLEAR, CLEAR_SURE = "room_follow", "room_locks", "room_clear", "room_clear_sure"
CLEARED = "room_cleared"  # the last clear's outcome, in words (shown until the next one)
LOCK_MODEL, LOCK_DEVICE, LOCK_DTYPE, LOCK_KERNELS = "room_lock_model", "room_lock_device", "room_lock_dtype", "room_lock_kernels"
LOCK_PROMPT, LOCK_OUTPUT, LOCK_LABS = "room_lock_prompt", "room_lock_output", "room_lock_labs"
TEACHERS = "the teacher's current choice"
FREE = "each student's choice"
LAB_WORDS = {"teacher": "teacher only", "all": "everyone", "none": "no one (labs paused)"}


def rows() -> tuple[list[dict], list[tuple[str, int, str]]]:
    """One row per member (name, role, page, state, request, queue wait) and the cancellable work:
    (session id, work id, words) for each request or job in flight."""
    members = sessions.present()
    work = sessions.sessions_work()
    now = time.perf_counter()
    out, cancellable = [], []
    for m in members:
        state, request, wait = m.activity, m.request, ""
        for item in work.get(m.session_id, []):
            if hasattr(item, "work"):  # a request (LiveRun)
                waiting = item.queue_seconds is None
                state = "waiting" if waiting else "running"
                request = f"{item.n_prompt} → {item.max_new_tokens} tokens"
                seconds = now - item.work.arrival if waiting else item.queue_seconds
                wait = f"{seconds:,.1f} s" + (" so far" if waiting else "")
                cancellable.append((m.session_id, item.work.id, f"{m.name}: run {request}"))
            else:  # a lab job
                state, request = "lab", item.label
                cancellable.append((m.session_id, item.id, f"{m.name}: {item.label}"))
        if m.session_id not in work and state in ("waiting", "running", "lab"):
            state, request = "idle", ""  # finished since its last script run
        out.append({"name": m.name, "role": m.role, "page": m.page or "home", "state": state, "request": request,
                    "queue wait": wait, "in the room": f"{(time.time() - m.joined) / 60:,.0f} min"})
    return out, cancellable


@st.fragment(run_every=REFRESH_S)
def status() -> None:
    table, cancellable = rows()
    states = [r["state"] for r in table]
    cols = st.columns(4)
    cols[0].metric("Connected", len(table))
    cols[1].metric("Waiting", states.count("waiting"))
    cols[2].metric("Running", states.count("running"))
    cols[3].metric("Lab jobs", states.count("lab"))
    st.dataframe(table, hide_index=True, width="stretch",
                 column_order=["name", "role", "page", "state", "request", "queue wait", "in the room"])
    engine = worker_link.status()
    if "running" in engine:
        st.caption(f"Engine worker: {engine['running']} running, {engine['waiting']} waiting "
                   f"(every session's runs and lab jobs, the teacher's too).")
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
        done = sessions.cancel_work(sid, int(wid))
        st.toast(f"Cancelled: {labels[pick]}." if done else "It had already finished.")
    if row.button("Cancel everything in flight", key=CANCEL_ALL, icon=":material/block:"):
        n = sum(sessions.cancel_session(sid) for sid in {sid for sid, _, _ in cancellable})
        st.toast(f"Cancelled {n} run{'s' if n != 1 else ''} and job{'s' if n != 1 else ''}.")


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
                   f"queue|batch`) and cannot change while the room runs: a restart would end every run and "
                   f"every student would enter the code again.")
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


def _clear() -> None:
    """The button's callback (before the script runs): the room cleared, the box unticked, the outcome kept in
    this session so that it stays on screen through the console's later reruns."""
    sessions.present()  # closed tabs out first: the count says how many students were really in the room
    gone = current.room().clear()
    for sid in gone:
        sessions.drop_session(sid)
    st.session_state[CLEAR_SURE] = False
    st.session_state[CLEARED] = (f"Cleared: {len(gone)} student session{'s' if len(gone) != 1 else ''} out of the "
                                 "room, their work cancelled and their runs dropped. Locks and follow-me stay as they "
                                 f"were. ({time.strftime('%H:%M:%S')})")


def clear_room() -> None:
    """Every student out: their work cancelled, their stores dropped; they must enter the code again."""
    sure = st.checkbox("Yes, clear the room (students enter the code again; their runs are dropped)", key=CLEAR_SURE)
    st.button("Clear the room", key=CLEAR, icon=":material/logout:", disabled=not sure, on_click=_clear)
    if done := st.session_state.get(CLEARED):
        st.success(done)
