"""Room mode: one server for a workshop, in one package (docs/architecture.md). Its state and rules are
Streamlit-free (an import contract keeps them so); current, gate, follow, sessions, console, code_display and
poll_panel are its Streamlit parts."""
