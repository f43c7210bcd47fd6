"""The suite mirrors the packages: the test of engine/serving/scheduling/scheduler.py sits in
tests/engine/serving/scheduling/test_scheduler.py."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the project folder


def navigation_only(monkeypatch) -> None:
    """Every AppTest run goes through app.py's st.navigation, as a real server's runs do.

    Streamlit 1.67 keeps the 'pages/ directory' flag in `PagesManager.uses_pages_directory`: set when a pages/
    folder sits beside the main script (ours holds pages/<role>/), and AppTest resets it before every run. While
    it is set, a run takes Streamlit's old multipage path (script_runner._mpa_v1), which runs pages/*.py on its own,
    without app.py (no sidebar, no run panel). st.navigation clears it; this clears it before every run."""
    import streamlit.testing.v1.app_test as app_test_module
    from streamlit.runtime.pages_manager import PagesManager

    class NavigationOnly(PagesManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False

    monkeypatch.setattr(app_test_module, "PagesManager", NavigationOnly)
