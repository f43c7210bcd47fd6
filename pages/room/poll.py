"""Predict, then measure — the room commits to an answer, then the engine measures it (peer instruction; layout only)."""
import streamlit as st

from ui.room import current, poll_panel, polls

st.title("Predict, then measure")
if current.is_teacher():
    st.caption("Open a question; each student answers alone on their own device, and nobody (the projector neither) "
               "sees the room's answers until you press **Reveal** or **Measure**, which lock them. After a discussion, "
               "**Revote** asks the same question again as a new round; **Measure** lets the engine answer."
               if not poll_panel.solo() else
               "Choose a question, commit to your prediction, then press **Measure**: the engine answers on this machine.")
    questions, problems = polls.load_bank()
    poll_panel.teacher_controls(questions, problems)
    poll_panel.projector()
    poll_panel.measure()
else:
    poll_panel.student()
