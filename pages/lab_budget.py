"""Placeholder until this page is built (see the issues)."""
import streamlit as st

st.title("lab_budget")
st.info("This page is being built.")
