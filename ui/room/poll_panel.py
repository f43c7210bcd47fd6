"""Predict, then measure on the page: the teacher opens a question, the room answers alone, the engine measures.

The Streamlit side of ui/room/polls.py (whose docstring gives peer instruction's rules: answers hidden until the reveal
or Measure, which lock them; a revote is a new round; nothing timed). Each student answers on their own device; the
room's answers show as a histogram and, for screen readers, as text. In room mode the Poll is the Room's (every session
sees the same one, and the pages refresh themselves); outside room mode it is this session's own, so one person can
predict, then measure for themselves. Measure runs the question's experiment, a registered lab job, in the engine worker
like any lab.
"""
from __future__ import annotations

import streamlit as st

from ui import state
from ui.engine_link import job_progress, worker_link
from ui.errors import EngineError
from ui.figures import fig_poll
from ui.room import current, follow, polls, sessions

REFRESH_S = 2.0  # how often the projector and the students' pages look for new answers


def solo() -> bool:
    return current.role() == "solo"


def the_poll() -> polls.Poll | None:
    return st.session_state.get(state.POLL_SOLO) if solo() else current.room().poll


def _open(poll: polls.Poll) -> None:
    if solo():
        st.session_state[state.POLL_SOLO] = poll
        st.session_state.setdefault(state.POLL_HISTORY, []).append(poll)
    else:
        current.room().open_poll(poll)  # the room's round from now on, kept in the room's file as it changes


def history() -> list[polls.Poll]:
    """Every round so far: the room's (kept across a restart), or this session's own outside room mode."""
    return list(st.session_state.get(state.POLL_HISTORY, [])) if solo() else current.room().all_rounds()


def _record(poll: polls.Poll, key: str, labels: list[str]) -> None:
    choice = st.session_state.get(key)
    st.session_state.pop(state.POLL_ERROR, None)
    if choice in labels:
        try:
            poll.answer(current.member_id(), labels.index(choice))
        except polls.PollError as exc:
            st.session_state[state.POLL_ERROR] = str(exc)


def _round(poll: polls.Poll) -> str:
    return f" (round {poll.round})" if poll.round > 1 else ""


def answer_widget(poll: polls.Poll, label: str = "Your prediction") -> None:
    """This session's one answer (it may change it until the answers lock)."""
    ss, labels = st.session_state, [o.label for o in poll.question.options]
    key = f"{state.POLL_CHOICE}{poll.serial}"
    mine = poll.answer_of(current.member_id())
    st.radio(f"**{label}{_round(poll)}:** {poll.question.question}", labels, index=mine if key not in ss else None,
             key=key, on_change=_record, args=(poll, key, labels), disabled=not poll.open)
    if ss.get(state.POLL_ERROR):
        st.error(ss[state.POLL_ERROR])
    mine = poll.answer_of(current.member_id())
    if mine is not None:
        more = (" You may change it until the answers lock." if poll.open else
                " The answers are locked: this is the one that counts.")
        st.success(f"Your answer: **{labels[mine]}**.{more}")
    elif not poll.open:
        st.warning("The answers locked before you answered.")


def results(poll: polls.Poll) -> None:
    """The room's answers as a histogram and as text, beside the figure and its explanation once measured."""
    q, counts = poll.question, poll.counts()
    measured, matched = poll.measured, poll.matched
    labels = [o.label for o in q.options]
    cols = st.columns([3, 2])
    with cols[0]:
        fig = fig_poll.poll_figure(labels, counts, matched, title=f"The room's answers{_round(poll)}")
        st.plotly_chart(fig, width="stretch", theme=None, key=f"poll_chart_{poll.serial}")
        st.markdown(fig_poll.poll_text(labels, counts, matched))
    with cols[1]:
        if measured is not None:
            figure = f"×{measured.value:.2f}" if measured.value is not None else (
                q.options[matched].label.split(":")[0] if matched is not None else "—")
            st.metric(measured.how, figure)
            st.markdown(f"**The measurement answers:** {q.options[matched].label if matched is not None else 'none of the options'}")
            st.caption(measured.text)
            if text := q.explanation(measured):
                st.markdown(text)
        elif poll.measuring_since is not None:
            st.info("Measuring on the room's engine… the answer shows here when it ends.")
        else:
            st.info("Not measured yet: Measure runs the experiment that answers it.")


def status_line(poll: polls.Poll) -> None:
    answered = sum(poll.counts())
    if solo():
        return
    students = [m for m in sessions.present() if m.role == "student"]
    state_words = "open: answers may change" if poll.open else "locked"
    st.caption(f"**{answered}** answer{'s' if answered != 1 else ''} from {len(students)} student"
               f"{'s' if len(students) != 1 else ''} in the room{_round(poll)} · {state_words}"
               + ("" if poll.revealed else " · hidden until you reveal them"))


def projector() -> None:
    """The teacher's (projector's) view, refreshing itself except while this session follows a measurement (a
    fragment's rerun must not take the page away from the run that waits for the measured figure)."""
    measuring_here = state.POLL_MEASURING in st.session_state or state.POLL_JOB in worker_link.store().jobs
    st.fragment(_projector, run_every=None if measuring_here else REFRESH_S)()


def _projector() -> None:
    poll = the_poll()
    if poll is None:
        st.info("No question is open: choose one above and press **Open**.")
        return
    st.subheader(poll.question.question)
    status_line(poll)
    if poll.interrupted:
        st.warning(poll.interrupted, icon=":material/restart_alt:")
    if solo():
        answer_widget(poll)
    if poll.revealed or (solo() and poll.measuring_since is not None):
        results(poll)
    elif not solo():
        st.info("The room's answers stay hidden, here too, until you press **Reveal** or **Measure**: everyone answers "
                "alone first.")


@st.fragment(run_every=REFRESH_S)
def student() -> None:
    """A student's view: answer alone; the room's answers show only once the teacher reveals them or measures. The
    page's one timer: it also looks for a follow-me push or an eviction (follow.OWN_TIMER)."""
    follow.look()
    poll = the_poll()
    if poll is None:
        st.info("No question yet: the teacher opens one, and it appears here by itself.")
        return
    answer_widget(poll, "Your answer")
    if poll.revealed:
        results(poll)
    else:
        st.caption("The room's answers show here when the teacher reveals them.")


def teacher_controls(questions: list[polls.Question], problems: list[str]) -> None:
    """Open a question (from the bank, or written here), lock, reveal, measure, revote, export the results."""
    for line in problems:
        st.warning(f"Question file skipped: {line}")
    poll = the_poll()
    busy = poll is not None and poll.measuring_since is not None
    by_id = {q.id: q for q in questions}
    cols = st.columns([5, 1])
    pick = cols[0].selectbox("A question from the bank (assets/polls/)", list(by_id), key=state.POLL_PICK,
                             format_func=lambda i: by_id[i].question)
    if cols[1].button("Open", key=state.POLL_OPEN, type="primary", disabled=busy or pick is None,
                      help="Opens it for the room (a new poll: answers start from zero)."):
        _open(polls.Poll(by_id[pick]))
        poll = the_poll()
    with st.expander("Write your own question"):
        text = st.text_input("Question", key=state.POLL_WRITE_TEXT, max_chars=polls.MAX_TEXT)
        options = st.text_area("Answers, one per line (a number in a line, like ×2, is the figure it predicts)",
                               key=state.POLL_WRITE_OPTIONS)
        names = [""] + list(polls.EXPERIMENTS)
        exp = st.selectbox("Measure with", names, key=state.POLL_WRITE_EXPERIMENT,
                           format_func=lambda n: polls.EXPERIMENTS[n].says if n else "nothing: the room discusses it")
        if st.button("Open my question", key=state.POLL_WRITE_OPEN, disabled=busy):
            try:
                _open(polls.Poll(polls.written_question(text, options, exp)))
                poll = the_poll()
            except polls.PollError as exc:
                st.error(str(exc))
    if poll is None:
        return
    c = st.columns(6)
    c[0].button("Lock answers" if poll.open else "Unlock answers", key=state.POLL_CLOSE, on_click=_lock,
                args=(poll, not poll.open), disabled=not poll.open and poll.settled,
                help="Locked answers no longer change. They unlock only while nobody has seen the room's answers.")
    c[1].button("Reveal", key=state.POLL_REVEAL, on_click=poll.reveal, disabled=poll.revealed,
                help="Locks the answers, then shows the room's answers to everyone (no measurement yet).")
    start = c[2].button("▶ Measure", key=state.POLL_MEASURE, type="primary",
                        disabled=poll.question.experiment is None or poll.measured is not None,
                        help="Locks the answers and runs the experiment that answers this question on the room's engine.")
    c[3].button("■ Cancel", key=state.POLL_CANCEL, help="Stops the measurement that is running.")
    if c[4].button("Revote", key=state.POLL_REVOTE, disabled=not poll.revealed or poll.measured is not None or busy,
                   help="After the discussion: the same question as a new round, answers from zero, hidden again. "
                        "The first round's answers stay as they were given."):
        _open(poll.revote())
        st.rerun()
    c[5].download_button("Results (CSV)", data=lambda: polls.to_csv(history() or [poll]), file_name="two_bends_polls.csv",
                         mime="text/csv", key=state.POLL_CSV, on_click="ignore",
                         help="Every round so far, with its answers and what was measured, as they stand when you click.")
    if poll.question.id == "written":
        st.download_button("Save my question as a file for assets/polls/", poll.question.to_json(),
                           file_name="my_question.json", mime="application/json", key=state.POLL_SAVE)
    if st.session_state.get(state.POLL_ERROR):
        st.error(st.session_state.pop(state.POLL_ERROR))
    if start:
        try:
            poll.begin_measure()
            st.session_state[state.POLL_MEASURING] = poll  # measure() below the projector starts its job
        except polls.PollError as exc:
            st.error(str(exc))


def _lock(poll: polls.Poll, is_open: bool) -> None:
    try:
        poll.set_open(is_open)
    except polls.PollError as exc:
        st.session_state[state.POLL_ERROR] = str(exc)


def _model():
    """The model the measurement ran on, as the worker describes it (its shapes give the computed comparison)."""
    try:
        return job_progress.model_info(worker_link.current_spec())
    except EngineError:
        return None


def measure() -> None:
    """Start or keep following this session's measurement (drawn below the projector, which stops refreshing
    meanwhile); its figure goes to the poll it answers."""
    ss = st.session_state
    target: polls.Poll | None = ss.get(state.POLL_MEASURING)
    jobs = worker_link.store().jobs
    if target is None:
        return
    start = state.POLL_JOB not in jobs
    exp, params = target.question.experiment, target.question.measure
    args, kwargs = exp.call(params)
    result = job_progress.lab_run(state.POLL_JOB, start, exp.job, args, kwargs, cancel_key=state.POLL_CANCEL,
                                 label=f"Measuring {exp.says}…")
    if state.POLL_JOB in worker_link.store().jobs:
        return  # still running (a rerun interrupted the wait): the next run follows it
    measured = None
    if result is not None:
        try:
            measured = exp.read(result, params, _model())
        except polls.PollError as exc:
            st.error(f"The measurement gave no answer: {exc}")
    target.end_measure(measured)
    ss.pop(state.POLL_MEASURING, None)
    if measured is not None:
        st.rerun()
