"""Streamlit-free Plotly figure builders and the shared chart theme."""
