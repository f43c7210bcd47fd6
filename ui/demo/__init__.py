"""Streamlit-free demo kit: shareable links, recorded runs, the HTML report."""
