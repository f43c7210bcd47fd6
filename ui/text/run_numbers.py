"""What the story pages read from one run: its phase summary (TTFT, TPOT, ...), how it shared the bridge, and
a measured server's records as traces. Streamlit-free; pages call these instead of engine.core.metrics."""
from __future__ import annotations

from engine.core.metrics import PhaseSummary, bridge_sharing, summarize
from engine.core.trace import Trace
from engine.serving.client.server_benchmark import trace_from_record
from ui.text.diagnosis import sharing_markdown


def summary(trace: Trace) -> PhaseSummary:
    """The run's measured metrics, with vLLM's definitions (engine.core.metrics.summarize)."""
    return summarize(trace)


def sharing_note(trace: Trace) -> str | None:
    """Markdown saying how many of its decode steps this request shared the bridge with others; None if none."""
    sharing = bridge_sharing(trace)
    if sharing is None or not sharing.shared_steps:
        return None
    return sharing_markdown(sharing)


def server_traces(records: list[dict]) -> list[Trace]:
    """One Trace per request measured on an outside server, so the ledger's panels draw it."""
    return [trace_from_record(rec) for rec in records]
