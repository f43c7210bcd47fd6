"""The Streamlit pieces every page shares: the cached model and the sidebar (layout only, no math).

This is the only module in ui/ that imports streamlit.
"""
from __future__ import annotations

import os

import streamlit as st

import engine
from ui import state

MODEL_CHOICES = {
    "smollm2-135m": "SmolLM2-135M-Instruct (bundled, offline)",
    "gpt2": "GPT-2 124M (downloads from Hugging Face)",
    "tiny-llama": "Tiny random Llama (instant, for testing)",
}
DEFAULT_MODEL = os.environ.get("TWO_BENDS_MODEL", "smollm2-135m")


@st.cache_resource(show_spinner=False, max_entries=3)
def _load(name: str, device: str, dtype: str) -> engine.LoadedModel:
    bar = st.progress(0.0, text=f"Loading {name}…")

    def progress(message: str, fraction: float) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=message)

    lm = engine.load_model(name, device=device, dtype=dtype, progress=progress)
    bar.empty()
    return lm


def current_model() -> engine.LoadedModel | None:
    """The model chosen in the sidebar, loaded once per server; None (with a message shown) on error."""
    name = st.session_state.get(state.MODEL, DEFAULT_MODEL)
    device = st.session_state.get(state.DEVICE, "auto")
    dtype = st.session_state.get(state.DTYPE, "float32")
    try:
        return _load(name, device, dtype)
    except engine.EngineError as exc:
        st.error(f"Could not load the model: {exc}")
        return None


def sidebar() -> None:
    """Model, device and dtype pickers shared by all pages (the prompt controls come with the dashboard)."""
    with st.sidebar:
        st.selectbox("Model", list(MODEL_CHOICES), format_func=MODEL_CHOICES.get, key=state.MODEL,
                     index=list(MODEL_CHOICES).index(DEFAULT_MODEL) if DEFAULT_MODEL in MODEL_CHOICES else 0)
        cols = st.columns(2)
        cols[0].selectbox("Device", ["auto", "cpu", "cuda", "mps"], key=state.DEVICE)
        cols[1].selectbox("Dtype", ["float32", "bfloat16", "float16"], key=state.DTYPE)
