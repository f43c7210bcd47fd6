"""Shared fixtures: tiny random models (fast, offline) and the real bundled SmolLM2 (session-wide)."""
import os

import pytest
import torch

import engine

os.environ.setdefault("TWO_BENDS_MODEL", "tiny-llama")  # AppTests use the tiny model unless a test says otherwise
# AppTests run the scheduler in a thread; a browser test's dashboard inherits this unless it sets its own
os.environ.setdefault("TWO_BENDS_WORKER", "thread")
# no compiled decode step unless a test asks (tests/engine/techniques/test_compiled_decode.py): compiling costs 3-15 s
# per process and model; the rest of the suite checks the eager paths the compiled step is measured against
os.environ.setdefault("TWO_BENDS_COMPILED_DECODE", "off")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def tiny_llama() -> engine.LoadedModel:
    return engine.load_model("tiny-llama", device="cpu")


@pytest.fixture(scope="session")
def tiny_gpt2() -> engine.LoadedModel:
    return engine.load_model("tiny-gpt2", device="cpu")


@pytest.fixture(scope="session")
def smollm() -> engine.LoadedModel:
    """The real SmolLM2-135M (converted once by `python -m engine prepare`, then ~1-4 s to load)."""
    return engine.load_model("smollm2-135m", device="cpu")


@pytest.fixture
def navigation_only(monkeypatch):
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
