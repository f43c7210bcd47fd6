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
CART_COLOR = "#8E44AD"  # the KV cart crossing between the workers
LANES = ("prefill worker (valley)", "decode worker (bridge)")
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
    """The steps of one policy: the two workers' lanes in disaggregated mode, else one row per request."""
    if any(s.worker for s in run.steps):
        return lanes_figure(run)
    return rows_figure(run)


def _chunk_words(chunk, rows) -> str:
    index, first, n = chunk
    return f"{rows[index]} prompt tokens {first + 1}–{first + n}"


def _step_words(step, rows) -> str:
    if step.kind == "prefill" and not step.chunks:
        return "prefill: " + ", ".join(rows[j] for j in step.requests)
    riders = step.riders
    words = [f"{len(riders)} rider(s): " + ", ".join(rows[j] for j in riders[:12])] if riders else []
    words += ["prefill chunk: " + _chunk_words(c, rows) for c in step.chunks]
    return "<br>".join(words)


def rows_figure(run: PolicyRun) -> go.Figure:
    """One row per request: waiting (grey), each prefill piece (orange: the whole prompt, or one chunk of it),
    each decode step it rode (blue); the hover names everyone who shared the step."""
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
    chunked = any(len(s.chunks) and (s.riders or s.chunks[0][1] > 0) for s in steps)
    bars = {"prefill": ([], [], [], []), "decode": ([], [], [], [])}
    for s in steps:
        width, words = max(s.end_s - s.start_s, 0.0) * MS, _step_words(s, rows)
        for i in s.requests:
            prefill = s.kind == "prefill" or any(c[0] == i for c in s.chunks)
            x, base, y, text = bars["prefill" if prefill else "decode"]
            x.append(width)
            base.append(s.start_s * MS)
            y.append(rows[i])
            text.append(words)
    for kind, color in (("prefill", PREFILL_COLOR), ("decode", DECODE_COLOR)):
        x, base, y, text = bars[kind]
        name = "prefill chunk" if kind == "prefill" and chunked else kind
        fig.add_bar(x=x, base=base, y=y, orientation="h", name=name, marker_color=color, text=text,
                    textposition="none", marker_line=dict(color="white", width=1),
                    hovertemplate="%{text}<br>%{x:.1f} ms<extra></extra>")
    cut = f" (first {MAX_TIMELINE_STEPS} steps)" if len(run.steps) > MAX_TIMELINE_STEPS else ""
    layout = base_layout(f"Engine steps — {run.label}{cut}", "time since the first arrival (ms)", "request",
                         height=max(300, 26 * len(rows) + 140))
    fig.update_layout(**layout, barmode="overlay", bargap=0.25)
    fig.update_yaxes(categoryorder="array", categoryarray=list(rows.values())[::-1])
    return _legend_below_axis_title(fig)


def lanes_figure(run: PolicyRun) -> go.Figure:
    """Disaggregated: the prefill worker's lane (the valley) under the decode worker's (the bridge); each KV cart
    drawn as a line from where the valley packed it to where the bridge took it in."""
    rows = {r.index: f"#{r.index + 1}" for r in run.requests}
    lane = {"prefill": LANES[0], "decode": LANES[1]}
    steps = run.steps[:MAX_TIMELINE_STEPS]
    fig = go.Figure()
    for kind, color, name in (("prefill", PREFILL_COLOR, "prefill"), ("handover", CART_COLOR, "pack the cart"),
                              ("join", CART_COLOR, "unpack the cart"), ("decode", DECODE_COLOR, "decode step")):
        chosen = [s for s in steps if s.kind == kind]
        text = [_step_words(s, rows) if kind in ("prefill", "decode") else
                f"{rows[s.requests[0]]}: {s.bytes / 1024:,.1f} KiB" for s in chosen]
        fig.add_bar(x=[max(s.end_s - s.start_s, 0.0) * MS for s in chosen], base=[s.start_s * MS for s in chosen],
                    y=[lane[s.worker] for s in chosen], orientation="h", name=name, marker_color=color, text=text,
                    textposition="none", marker_line=dict(color="white", width=1), width=0.5,
                    hovertemplate="%{text}<br>%{x:.2f} ms<extra></extra>")
    packed = {s.requests[0]: s for s in steps if s.kind == "handover"}
    joined = {s.requests[0]: s for s in steps if s.kind == "join"}
    x, y, text = [], [], []
    for h in run.handovers:
        if h.index in packed and h.index in joined:
            words = (f"cart {rows[h.index]}: {h.bytes / 1024:,.1f} KiB of KV cache ({h.tokens} tokens), "
                     f"{h.crossing_s * MS:.1f} ms from prefill end to the bridge")
            x += [packed[h.index].start_s * MS, joined[h.index].end_s * MS, None]
            y += [LANES[0], LANES[1], None]
            text += [words, words, None]
    fig.add_scatter(x=x, y=y, text=text, mode="lines+markers", name="KV handover", line=dict(color=CART_COLOR, width=2),
                    marker=dict(size=7), hovertemplate="%{text}<extra></extra>")
    cut = f" (first {MAX_TIMELINE_STEPS} steps)" if len(run.steps) > MAX_TIMELINE_STEPS else ""
    layout = base_layout(f"The two workers side by side — {run.label}{cut}", "time since the first arrival (ms)", "",
                         height=360)
    fig.update_layout(**layout, barmode="overlay")
    fig.update_yaxes(categoryorder="array", categoryarray=list(LANES))
    return _legend_below_axis_title(fig)


def _legend_below_axis_title(fig: go.Figure) -> go.Figure:
    """A short chart's legend at a fixed distance under the plot (a fraction of a short plot lands on the x title)."""
    margin = fig.layout.margin
    plot_px = max(fig.layout.height - (margin.t or 0) - (margin.b or 0), 1)
    fig.update_layout(legend_y=-80 / plot_px)
    return fig
