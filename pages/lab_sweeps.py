"""Placeholder until this page is built (see the issues)."""
import streamlit as st

st.title("lab_sweeps")
st.info("This page is being built.")
