"""AppTest of the whole app (app.py: sidebar, presenter bar, run panel, page) with the tiny model."""
import pytest
import streamlit.testing.v1.app_test as app_test_module
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state

APP = str(ROOT / "app.py")


class _NavigationOnly(PagesManager):
    """Keep every AppTest run going through app.py (see tests/pages/story/test_home_timing.py)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        PagesManager.uses_pages_directory = False


@pytest.fixture
def make_app(monkeypatch):
    """make_app(presenter=False, query=None) -> a fresh session's AppTest, not yet run."""
    monkeypatch.setattr(app_test_module, "PagesManager", _NavigationOnly)

    def make(presenter: bool = False, query: dict | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state[state.MODEL] = "tiny-llama"
        if presenter:
            at.session_state[state.PRESENTER] = True
        at.query_params.update(query or {})
        return at

    return make
