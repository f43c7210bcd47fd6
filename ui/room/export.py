"""After class: the whole room's session as files the teacher downloads. Streamlit-free, built at the click.

Three files: every poll round with its answers beside what was measured and when (ui/room/polls.py's CSV), every run
the class kept (one CSV row per run: who, what, its timings), and those runs as one session file (ui/demo/
session_file.py's format, which the dashboard opens again). Runs are the light copies a browser keeps (timings, no
attention captures); a session file holds at most session_file.MAX_RUNS of them, the latest.
"""
from __future__ import annotations

import csv
import io
import statistics

from ui.demo import session_file
from ui.room import polls

RUN_FIELDS = ["member", "run", "model", "device", "dtype", "source", "prompt_tokens", "output_tokens", "queue_s",
              "ttft_s", "decode_s", "tpot_median_ms", "stop_reason"]


def rounds_csv(rounds: list) -> str:
    return polls.to_csv(rounds)


def class_runs(kept: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """(whose, trace) of every kept run, browser by browser, each browser's in the order it ran them.
    `kept`: (whose, that browser's Runs) — whose is a member's name, or words for a browser not in the room now."""
    return [(whose, trace) for whose, runs in kept for trace in runs.history]


def runs_csv(runs: list[tuple[str, object]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=RUN_FIELDS)
    writer.writeheader()
    counts: dict[str, int] = {}
    for whose, t in runs:
        counts[whose] = counts.get(whose, 0) + 1
        steps = [s.seconds for s in t.steps]
        writer.writerow(dict(member=whose, run=counts[whose], model=t.model, device=t.device, dtype=t.dtype,
                             source=t.source, prompt_tokens=t.n_prompt, output_tokens=t.n_output,
                             queue_s=f"{t.queue_seconds:.4f}", ttft_s=f"{t.prefill_seconds:.4f}",
                             decode_s=f"{sum(steps):.4f}",
                             tpot_median_ms=f"{statistics.median(steps) * 1000:.3f}" if steps else "",
                             stop_reason=t.stop_reason))
    return out.getvalue()


def session_bytes(runs: list[tuple[str, object]], title: str) -> bytes:
    """The class's runs as one session file (the latest MAX_RUNS); TraceFileError (one line) when there is none."""
    return session_file.session_bytes([t for _, t in runs][-session_file.MAX_RUNS:], title=title)
