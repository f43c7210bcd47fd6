"""Shared fixtures: tiny random models (fast, offline) and the real bundled SmolLM2 (session-wide)."""
import os

import pytest
import torch

import engine

os.environ.setdefault("TWO_BENDS_MODEL", "tiny-llama")  # AppTests use the tiny model unless a test says otherwise
os.environ.setdefault("TWO_BENDS_WORKER", "thread")  # AppTests run the scheduler in a thread (the browser tests use a process)
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
    """AppTest resets the 'app_pages/ directory' flag before every run, so from the second run on it would run
    pages/<page>.py on its own, without app.py (no sidebar, no run panel). st.navigation apps never use that
    mode; this keeps every test run going through app.py, as a real server does."""
    import streamlit.testing.v1.app_test as app_test_module
    from streamlit.runtime.pages_manager import PagesManager

    class NavigationOnly(PagesManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False

    monkeypatch.setattr(app_test_module, "PagesManager", NavigationOnly)
