"""Opening a lab page in AppTest, through app.py (tiny model, set in conftest) or on its own."""
from streamlit.testing.v1 import AppTest

from tests import ROOT
from ui import state

APP = str(ROOT / "app.py")


def open_lab(name: str) -> AppTest:
    """pages/labs/<name>.py inside app.py's frame (sidebar, run panel)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(f"pages/labs/{name}.py")
    return at.run()


def open_lab_alone(name: str) -> AppTest:
    """The page on its own (no sidebar), with the sidebar's model choice pre-filled."""
    at = AppTest.from_file(str(ROOT / "pages" / "labs" / f"{name}.py"), default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    at.session_state[state.DEVICE] = "cpu"
    at.session_state[state.DTYPE] = "float32"
    return at.run()


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
