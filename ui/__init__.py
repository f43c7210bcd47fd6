"""Helpers the Streamlit pages call, by role: ui/figures, ui/text, ui/demo (and state.py, errors.py) never import
streamlit; the modules that do live in ui/controls (launcher, sidebar, presenter mode, stepper, demo panel) and
ui/engine_link (worker_link.py, the link to the engine worker), and in ui/room the gate and the join code's
display (gate.py, code_display.py). Pages import only ui (an import-linter contract)."""
