"""The teacher console — the join code, who is in the room, what runs and waits, the room's locks, the session's files
after class (room mode, teacher only; layout only)."""
import streamlit as st

from ui.controls.widgets import MODEL_CHOICES
from ui.room import code_display, console, current

st.title("Teacher console")
if not current.is_teacher():
    st.error("This page is the teacher's: enter the teacher code to open it.")
    st.stop()
if current.role() == "solo":
    st.info("Room mode is off: one person on one machine. Start the dashboard with `--room` to run a class.")
    st.stop()

code_display.header()
console.notices()
st.subheader("The room now")
console.status()
with st.expander("Remove one student"):
    console.remove_student()
st.subheader("Follow me")
console.follow_me()
st.subheader("The room's settings")
console.locks(MODEL_CHOICES)
st.subheader("After class: the session's files")
console.after_class()
st.subheader("Clear the room")
console.clear_room()
