"""The teacher console — who is in the room, what runs and waits, the room's locks (room mode, teacher only)."""
import streamlit as st

from ui.room import gate

st.title("Teacher console")
if not gate.is_teacher():
    st.error("This page is the teacher's: enter the teacher code to open it.")
    st.stop()
st.info("Room status, cancelling, locks and follow-me come here.")
