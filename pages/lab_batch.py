"""Placeholder until this page is built (see the issues)."""
import streamlit as st

st.title("lab_batch")
st.info("This page is being built.")
