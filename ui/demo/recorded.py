"""Recorded runs in the dashboard: the traces shipped in assets/traces/, replay-only mode, what a recording offers.

A recorded run is a Trace read from a file (engine.core.trace_file checks it): every page draws it exactly
like a fresh run, but no model is asked for anything, so only the attention layers it carries can be shown.
With TWO_BENDS_REPLAY=1 (scripts/dashboard.sh --replay) the dashboard never starts the engine worker or
loads a model: a weak laptop can still show a class every page of a recorded run. Streamlit-free.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.core.trace_file import describe, load_trace

TRACES_DIR = Path(__file__).resolve().parents[2] / "assets" / "traces"


def replay_only() -> bool:
    """True when the operator started the dashboard for recorded runs only (no engine worker, no model)."""
    return os.environ.get("TWO_BENDS_REPLAY", "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Shipped:
    name: str  # file name without .json: what a link's ?trace= names
    path: Path


def shipped() -> list[Shipped]:
    """The recorded runs that come with the dashboard, by file name."""
    return [Shipped(p.stem, p) for p in sorted(TRACES_DIR.glob("*.json"))]


def shipped_names() -> set[str]:
    return {s.name for s in shipped()}


@lru_cache(maxsize=8)
def _load(path: str, mtime: float):
    return load_trace(path)


def load_shipped(name: str):
    """The shipped recording `name`, read and checked once per process and shared by every session (pages
    never modify a trace). Raises engine.core.trace_file.TraceFileError."""
    path = TRACES_DIR / f"{name}.json"
    return _load(str(path), path.stat().st_mtime if path.exists() else 0.0)


def label(trace, fallback: str = "") -> str:
    """'Title — model · device · dtype · machine · date' for lists and headings."""
    title = (trace.settings.get("recording") or {}).get("title") or fallback
    return f"{title} — {describe(trace)}" if title else describe(trace)


def is_recorded(trace) -> bool:
    """A run read from a file: it carries no way to ask the model for more (see ui/engine_link/job_progress.py's ensure_layer)."""
    return not trace.settings.get("model_spec")


def layer_choices(trace, n_layers: int) -> list[int]:
    """Layers a page may offer: every layer for a live run (more are captured on demand), the captured ones
    for a recorded run (no model to capture others)."""
    if is_recorded(trace) and trace.attention is not None and trace.attention.layers:
        return sorted(trace.attention.layers)
    return list(range(n_layers))
