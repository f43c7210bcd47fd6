"""Predict, then measure — the room answers a question before the engine does (room mode)."""
import streamlit as st

st.title("Predict, then measure")
st.info("The room's poll comes here.")
