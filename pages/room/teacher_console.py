"""The teacher console — who is in the room, what runs and waits, the room's locks (room mode, teacher only)."""
import streamlit as st

from ui.controls.widgets import MODEL_CHOICES
from ui.room import console, current

st.title("Teacher console")
if not current.is_teacher():
    st.error("This page is the teacher's: enter the teacher code to open it.")
    st.stop()
if current.role() == "solo":
    st.info("Room mode is off: one person on one machine. Start the dashboard with `--room` to run a class.")
    st.stop()

st.subheader("The room now")
console.status()
st.subheader("Follow me")
console.follow_me()
st.subheader("The room's settings")
console.locks(MODEL_CHOICES)
st.subheader("Clear the room")
console.clear_room()
