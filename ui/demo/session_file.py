"""A whole session in one file: every run of a browser's history, saved together and opened again after every check.

Streamlit-free; ui/controls/demo_panel.py offers it beside the single-run Trace file. Each run is packed
as a Trace file packs it (engine/core/trace_file.py: arrays packed, when and where it was recorded), and
each is checked as a Trace file is checked, so a bad file is refused with one line and changes nothing.
A single-run Trace file opens here too (a session of one run).
"""
from __future__ import annotations

import datetime as dt
import json

from engine.core.trace import Trace
from engine.core.trace_file import MAX_FILE_BYTES, TraceFileError, read_trace, trace_bytes

KIND = "two-bends-session"  # the file's "kind": what tells a session file from a single-run Trace file
VERSION = 1
MAX_RUNS = 200  # far above a session's history (ui/engine_link/run_store.py keeps 30)


def _same_run(a: Trace, b: Trace) -> bool:
    """The history keeps a light copy of the shown run: same tokens, same timings."""
    return (a.prompt_ids == b.prompt_ids and a.output_ids == b.output_ids and a.prefill_seconds == b.prefill_seconds
            and [s.seconds for s in a.steps] == [s.seconds for s in b.steps])


def session_bytes(history: list[Trace], shown: Trace | None = None, title: str = "") -> bytes:
    """The file to save: every run of `history` in order; the newest in full (its attention captures) when it is
    the run the pages show and the file stays within the size a file may have."""
    if not history:
        raise TraceFileError("this session has no run to save yet")
    runs = [trace_bytes(t) for t in history]
    if shown is not None and _same_run(shown, history[-1]):
        full = trace_bytes(shown)
        if sum(map(len, runs[:-1])) + len(full) < MAX_FILE_BYTES - 2**20:
            runs[-1] = full
    head = json.dumps(dict(kind=KIND, version=VERSION, title=title, saved=dt.date.today().isoformat(),
                           runs=[]), separators=(",", ":"))
    return head[:-3].encode("utf-8") + b"[" + b",".join(runs) + b"]}"  # head ends in "runs":[]}


def _check_size(data: bytes, name: str) -> None:
    if len(data) > MAX_FILE_BYTES:
        raise TraceFileError(f"{name} is {len(data) / 2**20:,.1f} MB; a session file may be at most "
                             f"{MAX_FILE_BYTES // 2**20} MB")


def read_session(data: bytes, name: str = "the file") -> list[Trace]:
    """The checked runs of a session file (or of a single-run Trace file), oldest first; TraceFileError (one
    line) for anything else. Either every run passes or nothing is returned."""
    _check_size(data, name)
    try:
        parsed = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return [read_trace(data, name)]  # read_trace says precisely what is wrong with the bytes
    if not isinstance(parsed, dict) or parsed.get("kind") != KIND:
        return [read_trace(data, name)]  # a single-run file, or not a trace at all: its checks say which
    if parsed.get("version") != VERSION:
        raise TraceFileError(f"{name} is a session file of version {str(parsed.get('version'))[:20]!r}; this "
                             f"dashboard reads version {VERSION}")
    runs = parsed.get("runs")
    if not isinstance(runs, list) or not runs:
        raise TraceFileError(f"{name} is a session file with no runs in it")
    if len(runs) > MAX_RUNS:
        raise TraceFileError(f"{name} holds {len(runs):,} runs; a session file may hold at most {MAX_RUNS}")
    traces = []
    for i, run in enumerate(runs, start=1):
        if not isinstance(run, dict):
            raise TraceFileError(f"{name}: run {i} of {len(runs)} is not a trace object")
        try:
            traces.append(read_trace(json.dumps(run).encode("utf-8"), f"run {i} of {len(runs)}"))
        except TraceFileError as exc:
            raise TraceFileError(f"{name}: {exc}") from None
    return traces


def file_name(history: list[Trace]) -> str:
    models = sorted({t.model for t in history})
    model = "".join(ch if ch.isalnum() else "-" for ch in (models[0] if len(models) == 1 else "models")).lower()
    return f"two-bends-session-{model.strip('-')[:40] or 'model'}-{len(history)}runs.json"
