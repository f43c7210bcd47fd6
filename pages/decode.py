"""Placeholder until this page is built (see the issues)."""
import streamlit as st

st.title("decode")
st.info("This page is being built.")
