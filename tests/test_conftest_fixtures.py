"""The shared fixtures in tests/conftest.py do what they say: `navigation_only` keeps every AppTest run off
Streamlit's old pages-directory path (script_runner._mpa_v1), a page switch and reruns included."""
from pathlib import Path

import streamlit.runtime.scriptrunner.script_runner as script_runner
from streamlit.testing.v1 import AppTest

from ui import state

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_has_a_pages_folder_so_the_flag_matters():
    assert (ROOT / "pages").is_dir()  # without one, Streamlit never sets the flag and the fixture has nothing to do


def test_navigation_only_keeps_every_run_on_app_py(monkeypatch, navigation_only):
    old_path = []
    real = script_runner._mpa_v1
    monkeypatch.setattr(script_runner, "_mpa_v1", lambda main: (old_path.append(main), real(main)))

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    at.run()
    at.switch_page("pages/story/decode.py").run()
    at.run()
    assert not at.exception and old_path == []  # three runs, none on the old path
