"""Recorded runs on disk: a Trace saved as one JSON file, and read back only after it passed every check.

A recorded run replays anywhere with no model loaded (a class on weak laptops, a GPU run shown on a
CPU laptop). Reading never trusts the file: size first, then UTF-8 and JSON, then engine.core.trace_check.
Every refusal is a TraceFileError with one plain sentence (the CLI prints it, the dashboard shows it).
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

from engine.core.trace import Trace
from engine.core.trace_check import check_arrays, check_fields
from engine.errors import EngineError

MAX_FILE_BYTES = 50 * 2**20  # 50 MB: far above a dashboard run's file (a few MB), far below a browser's limits


class TraceFileError(EngineError):
    """A file that is not a usable recorded trace; the message says why in one line."""


def trace_bytes(trace: Trace, title: str = "") -> bytes:
    """The file to save: compact JSON (arrays packed), with when and where it was recorded in `settings`."""
    recording = dict(trace.settings.get("recording") or {})
    recording.setdefault("date", dt.date.today().isoformat())
    recording.setdefault("machine", trace.env.get("device_name", ""))
    if title:
        recording["title"] = title
    saved = replace(trace, settings={k: v for k, v in trace.settings.items() if k != "model_spec"} | {"recording": recording})
    return saved.to_json(separators=(",", ":")).encode("utf-8")


def read_trace(data: bytes, name: str = "the file") -> Trace:
    """A checked Trace from a file's bytes; TraceFileError (one line) for anything else."""
    if len(data) > MAX_FILE_BYTES:
        raise TraceFileError(f"{name} is {len(data) / 2**20:,.1f} MB; a recorded trace may be at most "
                             f"{MAX_FILE_BYTES // 2**20} MB")
    if not data.strip():
        raise TraceFileError(f"{name} is empty")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TraceFileError(f"{name} is not a JSON file (it is not even UTF-8 text)") from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        end = len(text.rstrip())
        cut_number = exc.pos == end - 1 and text[exc.pos] in ".eE+-"  # a file cut inside a number, e.g. "0."
        if exc.pos >= end or cut_number or exc.msg.startswith("Unterminated string"):
            raise TraceFileError(f"{name} is truncated: the JSON stops before its end (after {len(text):,} "
                                 "characters)") from None
        raise TraceFileError(f"{name} is not a JSON file ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise TraceFileError(f"{name} nests its JSON too deeply to be a trace") from None
    try:
        check_fields(parsed)
        trace = Trace.from_dict(parsed)
        check_arrays(trace)
    except (ValueError, TypeError, KeyError) as exc:
        raise TraceFileError(f"{name} is not a usable trace: {_one_line(exc)}") from None
    return trace


def load_trace(path: str | Path) -> Trace:
    """Read and check the trace file at `path` (its size is checked before it is read)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TraceFileError(f"{path.name} is {size / 2**20:,.1f} MB; a recorded trace may be at most "
                                 f"{MAX_FILE_BYTES // 2**20} MB")
        data = path.read_bytes()
    except IsADirectoryError:
        raise TraceFileError(f"{path} is a folder, not a trace file") from None
    except FileNotFoundError:
        raise TraceFileError(f"{path} does not exist") from None
    except OSError as exc:
        raise TraceFileError(f"{path} cannot be read ({exc.strerror or exc})") from None
    return read_trace(data, path.name)


def save_trace(trace: Trace, path: str | Path, title: str = "") -> Path:
    path = Path(path)
    path.write_bytes(trace_bytes(trace, title))
    return path


def describe(trace: Trace) -> str:
    """'model · device · dtype · machine · date' for a recorded run (what the dashboard and `show` print)."""
    recording = trace.settings.get("recording") or {}
    machine = recording.get("machine") or trace.env.get("device_name", "")
    parts = [trace.model, trace.device, trace.dtype, machine, recording.get("date", "")]
    return " · ".join(str(p) for p in parts if p)


def _one_line(exc: Exception) -> str:
    """The reason in one short line of printable characters (it may quote the file's own field names)."""
    text = str(exc).strip().splitlines()
    message = text[0] if text else type(exc).__name__
    if isinstance(exc, KeyError):
        message = f"field {message} is missing"
    return "".join(ch if ch.isprintable() else "?" for ch in message)[:300]
