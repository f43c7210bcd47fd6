"""Helpers the Streamlit pages call, by role: ui/figures, ui/text and ui/demo never import streamlit;
the modules that do live in ui/controls (sidebar, presenter mode, stepper, demo panel) and ui/engine_link
(worker_link.py, the link to the engine worker)."""
