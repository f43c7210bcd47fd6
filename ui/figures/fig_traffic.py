"""Figures of the Traffic lab: TTFT and ITL per policy, goodput beside throughput, and the engine's step timeline.

Streamlit-free: each function takes a TrafficRun (engine/labs/traffic.py) and returns a plotly Figure.
"""
from __future__ import annotations

import plotly.graph_objects as go

from engine.labs.traffic import PolicyRun, TrafficRun
from engine.perfmodel.goodput import SLO, goodput, throughput
from ui.figures.theme import DECODE_COLOR, ESTIMATE_DASH, NEUTRAL_COLOR, PREFILL_COLOR, base_layout

MS = 1000.0
POLICY_COLORS = {"queue": NEUTRAL_COLOR, "batch": DECODE_COLOR, "chunked": "#2E9E6A", "disaggregated": "#8E44AD"}
MAX_TIMELINE_STEPS = 4000  # beyond this the timeline shows the first steps only (a browser draws each bar)


def _ran(result: TrafficRun) -> list[PolicyRun]:
    return [p for p in result.policies if p.available and p.requests]


def _box(result: TrafficRun, values, title: str, y_title: str, slo_ms: float | None, slo_name: str) -> go.Figure:
    fig, top = go.Figure(), 0.0
    for p in _ran(result):
        ys = [v * MS for v in values(p)]
        top = max([top, *ys])
        fig.add_box(y=ys, name=p.label, boxpoints="all", jitter=0.4, pointpos=0,
                    marker=dict(color=POLICY_COLORS.get(p.policy, NEUTRAL_COLOR), size=5), line=dict(width=2))
    if slo_ms is not None and slo_ms <= 3 * top:  # far above every request, the line would squash the boxes
        fig.add_hline(y=slo_ms, line=dict(color=PREFILL_COLOR, dash=ESTIMATE_DASH, width=2),
                      annotation_text=slo_name, annotation_position="top left")
    elif slo_ms is not None:
        title += f" ({slo_name} {slo_ms:,.0f} ms: far above)"
    fig.update_layout(**base_layout(title, "", y_title), showlegend=False)
    return fig


def ttft_figure(result: TrafficRun, slo: SLO | None = None) -> go.Figure:
    """TTFT of every request (queueing included), per policy, with the TTFT objective."""
    return _box(result, lambda p: [r.ttft_s for r in p.requests if r.ttft_s is not None and not r.error],
                "Time to first token per request", "TTFT (ms)", slo.ttft_s * MS if slo else None, "TTFT objective")


def itl_figure(result: TrafficRun, slo: SLO | None = None) -> go.Figure:
    """Every gap between tokens, per policy, with the TPOT objective (a mean gap: single gaps may pass it)."""
    return _box(result, lambda p: [g for r in p.requests if not r.error for g in r.itl_s],
                "Gaps between tokens (ITL)", "ITL (ms)", slo.tpot_s * MS if slo else None, "TPOT objective")


def goodput_figure(result: TrafficRun, slo: SLO) -> go.Figure:
    """Raw throughput and goodput side by side per policy (requests per second)."""
    ran = _ran(result)
    labels = [p.label for p in ran]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[throughput(p.outcomes()) for p in ran], name="throughput (all requests)",
                marker_color=NEUTRAL_COLOR)
    fig.add_bar(x=labels, y=[goodput(p.outcomes(), slo) for p in ran], name="goodput (met both SLOs)",
                marker_color=DECODE_COLOR)
    fig.update_layout(**base_layout("Goodput next to raw throughput", "", "requests / s"), barmode="group")
    return fig


def timeline_figure(run: PolicyRun) -> go.Figure:
    """One row per request: waiting (grey), prefill (orange), each decode step it rode (blue)."""
    rows = {r.index: f"#{r.index + 1}" for r in run.requests}
    wait_x, wait_base, wait_y = [], [], []
    for r in run.requests:
        if r.started_s is not None and r.started_s > r.arrived_s:
            wait_x.append((r.started_s - r.arrived_s) * MS)
            wait_base.append(r.arrived_s * MS)
            wait_y.append(rows[r.index])
    fig = go.Figure()
    fig.add_bar(x=wait_x, base=wait_base, y=wait_y, orientation="h", name="waiting", marker_color="#C8C8C8",
                hovertemplate="waited %{x:.1f} ms<extra></extra>")
    steps = run.steps[:MAX_TIMELINE_STEPS]
    for kind, color in (("prefill", PREFILL_COLOR), ("decode", DECODE_COLOR)):
        x, base, y, text = [], [], [], []
        for s in steps:
            if s.kind != kind:
                continue
            for i in s.requests:
                x.append(max(s.end_s - s.start_s, 0.0) * MS)
                base.append(s.start_s * MS)
                y.append(rows[i])
                text.append(f"{len(s.requests)} rider(s): " + ", ".join(rows[j] for j in s.requests[:12]))
        fig.add_bar(x=x, base=base, y=y, orientation="h", name=kind, marker_color=color, text=text,
                    textposition="none", hovertemplate="%{text}<br>%{x:.1f} ms<extra></extra>")
    cut = f" (first {MAX_TIMELINE_STEPS} steps)" if len(run.steps) > MAX_TIMELINE_STEPS else ""
    layout = base_layout(f"Engine steps — {run.label}{cut}", "time since the first arrival (ms)", "request",
                         height=max(300, 26 * len(rows) + 140))
    fig.update_layout(**layout, barmode="overlay", bargap=0.25)
    fig.update_yaxes(categoryorder="array", categoryarray=list(rows.values())[::-1])
    return fig
