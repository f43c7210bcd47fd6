"""Helpers the Streamlit pages call, by role (docs/architecture.md). Only ui/controls, ui/engine_link and the
Streamlit parts of ui/room import streamlit; pages import only ui (import-linter contracts in pyproject.toml)."""
