"""The dispatcher's ledger as charts: time split by phase, each token's latency, cumulative time, runs compared.

Every figure uses the phase colours of ui/figures/theme.py (prefill orange, decode blue) and labelled axes
with units. Inputs are engine Traces / PhaseSummaries or plain lists; Streamlit-free.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.theme import DECODE_COLOR, NEUTRAL_COLOR, PREFILL_COLOR, base_layout, subtitled

MS = 1000.0
MIN_LABEL_SHARE = 0.15  # narrower bar segments get no text inside (their numbers are in the title)
OFF_SCALE = 3.0  # a TTFT bar more than this many times the largest ITL is clipped, with its value written on it


def phase_split_figure(summary, height: int = 190, where: str = "") -> go.Figure:
    """One horizontal bar: end-to-end time split into prefill (TTFT) and decode, in ms. `where`: a run not measured
    here says so under the title (run_numbers.chart_note, theme.subtitled), so a chart saved as a PNG keeps it."""
    prefill_ms, decode_ms = summary.prefill_s * MS, summary.decode_s * MS
    share = summary.prefill_share if math.isfinite(summary.prefill_share) else 0.0
    fig = go.Figure()
    parts = (("Prefill (TTFT)", prefill_ms, PREFILL_COLOR, share), ("Decode", decode_ms, DECODE_COLOR, 1.0 - share))
    narrow = [frac < MIN_LABEL_SHARE for *_, frac in parts]
    for i, (name, value, color, frac) in enumerate(parts):
        label = f"{name}: {value:,.0f} ms ({frac:.0%})"
        # a narrow segment is labelled from inside its wide neighbour, next to it (an arrow points at it);
        # the wide one then writes its own label at its far end, out of the way
        anchor = ("start" if i == 0 else "end") if narrow[1 - i] else "middle"
        fig.add_trace(go.Bar(y=["this request"], x=[value], name=name, orientation="h", marker_color=color,
                             text=[label if not narrow[i] else ""], textposition="inside",
                             insidetextanchor=anchor, textfont=dict(color="white"),
                             hovertemplate=f"{name}: %{{x:,.1f}} ms<extra></extra>"))
        if narrow[i] and value > 0:
            fig.add_annotation(x=value / 2 if i == 0 else prefill_ms + value / 2, y="this request", text=label,
                               showarrow=True, arrowhead=0, arrowcolor="white", arrowwidth=2, ax=40 if i == 0 else -40,
                               ay=0, xanchor="left" if i == 0 else "right", font=dict(color="white"))
    title = f"Where the time went: prefill {prefill_ms:,.0f} ms ({share:.0%}) · decode {decode_ms:,.0f} ms ({1 - share:.0%})"
    layout = base_layout(title, "time (ms)", "", height)
    layout.update(margin=dict(l=20, r=30, t=60, b=55), height=height)  # no legend: the bar labels itself
    fig.update_layout(**layout, barmode="stack", showlegend=False)
    subtitled(fig, where)
    fig.update_yaxes(showticklabels=False)
    return fig


def itl_figure(ttft_s: float, itl_s, title: str = "Each token's latency", height: int = 420,
               stall_s=None, riders=None, where: str = "") -> go.Figure:
    """Bar 0 = TTFT (prefill colour), bars 1..n = each decode step's ITL (decode colour), in ms.

    When TTFT dwarfs the decode steps the y-axis is clipped so the steps stay readable, and the TTFT
    bar carries its value as text. With continuous batching, `stall_s` (the part of each gap spent on
    other requests' prefills) is stacked in grey and `riders` (sequences sharing each step) is drawn
    on a second axis.
    """
    itl_ms = np.asarray(itl_s, dtype=float) * MS
    stall_ms = np.zeros_like(itl_ms) if stall_s is None else np.asarray(stall_s, dtype=float) * MS
    riders = None if riders is None or max(riders, default=1) <= 1 else np.asarray(riders)
    ttft_ms = ttft_s * MS
    steps = np.arange(1, itl_ms.size + 1)
    fig = go.Figure()
    top = float(itl_ms.max()) if itl_ms.size else ttft_ms
    clipped = itl_ms.size > 0 and ttft_ms > OFF_SCALE * top
    label = f"TTFT {ttft_ms:,.0f} ms" + (" ↑ off scale" if clipped else "")
    fig.add_trace(go.Bar(x=[0], y=[ttft_ms], name="TTFT (prefill)", marker_color=PREFILL_COLOR,
                         hovertemplate="TTFT: %{y:,.1f} ms<extra></extra>"))
    fig.add_annotation(x=0, y=top * 1.8 if clipped else ttft_ms, text=label, showarrow=True, arrowcolor=PREFILL_COLOR,
                       ax=60, ay=-25 if not clipped else 25, font=dict(color=PREFILL_COLOR), xanchor="left")
    fig.add_trace(go.Bar(x=steps, y=itl_ms - stall_ms, name="ITL (decode step)", marker_color=DECODE_COLOR,
                         hovertemplate="token %{x}: %{y:,.1f} ms<extra></extra>"))
    if stall_ms.any():
        fig.add_trace(go.Bar(x=steps, y=stall_ms, name="waiting: another request's prefill", marker_color=NEUTRAL_COLOR,
                             hovertemplate="token %{x}: %{y:,.1f} ms behind other prefills<extra></extra>"))
    if riders is not None:
        fig.add_trace(go.Scatter(x=steps, y=riders, name="riders on the bridge", yaxis="y2", mode="lines",
                                 line=dict(color="#222222", width=2, shape="hv"),
                                 hovertemplate="token %{x}: %{y} sequences shared the step<extra></extra>"))
    if itl_ms.size:
        p50 = float(np.median(itl_ms))
        fig.add_trace(go.Scatter(x=[0.5, itl_ms.size + 0.5], y=[p50, p50], mode="lines", name=f"ITL p50 {p50:,.1f} ms",
                                 line=dict(color=NEUTRAL_COLOR, dash="dot", width=3), hoverinfo="skip"))
    fig.update_layout(**base_layout(title, "output token (0 = the first)", "latency (ms)", height),
                      bargap=0.15, barmode="stack")
    if riders is not None:
        fig.update_layout(yaxis2=dict(title=dict(text="riders"), overlaying="y", side="right", rangemode="tozero",
                                      showgrid=False, dtick=max(1, int(riders.max()) // 4)))
    if clipped:
        fig.update_yaxes(range=[0, top * 1.8])
    subtitled(fig, where)
    return fig


def cumulative_figure(trace, height: int = 420, where: str = "") -> go.Figure:
    """Elapsed time (ms) against tokens delivered: the prefill segment, then the decode segment."""
    ttft_ms = trace.prefill_seconds * MS
    elapsed = ttft_ms + np.cumsum([s.seconds for s in trace.steps]) * MS
    decode_x = np.arange(1, elapsed.size + 2)  # token 1 arrives at TTFT, token k+1 after k decode steps
    decode_y = np.concatenate([[ttft_ms], elapsed])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, ttft_ms], mode="lines+markers", name="Prefill (until first token)",
                             line=dict(color=PREFILL_COLOR, width=5), fill="tozeroy",
                             hovertemplate="first token at %{y:,.1f} ms<extra></extra>"))
    fig.add_trace(go.Scatter(x=decode_x, y=decode_y, mode="lines", name="Decode (one token per step)",
                             line=dict(color=DECODE_COLOR, width=5), fill="tozeroy",
                             hovertemplate="token %{x}: %{y:,.1f} ms<extra></extra>"))
    fig.update_layout(**base_layout("Cumulative time", "tokens delivered", "elapsed since request (ms)", height))
    subtitled(fig, where)
    return fig


def runs_figure(table, height: int = 420) -> go.Figure:
    """Runs side by side: prefill and decode time (ms) stacked per run, from `ui.text.runs.runs_table`."""
    labels = [f"#{r} · {p}→{o} tok" for r, p, o in zip(table["run"], table["prompt tokens"], table["output tokens"])]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=table["TTFT (ms)"], name="Prefill (TTFT)", marker_color=PREFILL_COLOR,
                         hovertemplate="%{x}<br>prefill %{y:,.1f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=labels, y=table["decode (ms)"], name="Decode", marker_color=DECODE_COLOR,
                         hovertemplate="%{x}<br>decode %{y:,.1f} ms<extra></extra>"))
    fig.update_layout(**base_layout("Runs compared: time per phase", "run (prompt → output tokens)", "time (ms)",
                                                  height), barmode="stack")
    return fig

