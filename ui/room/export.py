"""After class: the whole room's session as files the teacher downloads. Streamlit-free, built at the click.

The class's kept runs (the light copies browsers keep: timings, no attention captures) as CSV, one row per run, and
as one session file the dashboard opens again (the latest session_file.MAX_RUNS). The poll rounds' CSV is
ui/room/polls.py's.
"""
from __future__ import annotations

import csv
import io
import statistics

from ui.demo import session_file
from ui.text.runs import origin

RUN_FIELDS = ["member", "run", "model", "device", "dtype", "source", "prompt_tokens", "output_tokens", "queue_s",
              "ttft_s", "decode_s", "tpot_median_ms", "stop_reason"]


def runs_csv(runs: list[tuple[str, object]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=RUN_FIELDS)
    writer.writeheader()
    counts: dict[str, int] = {}
    for whose, t in runs:
        counts[whose] = counts.get(whose, 0) + 1
        steps = [s.seconds for s in t.steps]
        writer.writerow(dict(member=whose, run=counts[whose], model=t.model, device=t.device, dtype=t.dtype,
                             source=origin(t), prompt_tokens=t.n_prompt, output_tokens=t.n_output,
                             queue_s=f"{t.queue_seconds:.4f}", ttft_s=f"{t.prefill_seconds:.4f}",
                             decode_s=f"{sum(steps):.4f}",
                             tpot_median_ms=f"{statistics.median(steps) * 1000:.3f}" if steps else "",
                             stop_reason=t.stop_reason))
    return out.getvalue()


def session_bytes(runs: list[tuple[str, object]], title: str) -> bytes:
    """The class's runs as one session file (the latest MAX_RUNS); TraceFileError (one line) when there is none."""
    return session_file.session_bytes([t for _, t in runs][-session_file.MAX_RUNS:], title=title)
