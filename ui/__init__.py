"""Helpers the Streamlit pages call. Figure and text builders here never import streamlit;
`ui/controls/widgets.py` is the one module that does (shared sidebar and the cached model)."""
