"""AppTest of the whole app (app.py: sidebar, presenter bar, run panel, page) with the tiny model."""
import pytest
from streamlit.testing.v1 import AppTest

from tests import ROOT, navigation_only
from ui import state

APP = str(ROOT / "app.py")



@pytest.fixture
def make_app(monkeypatch):
    """make_app(presenter=False, query=None) -> a fresh session's AppTest, not yet run."""
    navigation_only(monkeypatch)

    def make(presenter: bool = False, query: dict | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state[state.MODEL] = "tiny-llama"
        if presenter:
            at.session_state[state.PRESENTER] = True
        at.query_params.update(query or {})
        return at

    return make
