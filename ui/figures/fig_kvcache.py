"""The KV cache as a picture: one column per cached token, one row per layer, growing by one column per step.

Streamlit-free Plotly builders. Cell colour = L2 norm of the cached key (or value) vector, from
`trace.kv_key_norms` / `trace.kv_value_norms` (layers, kv_heads, tokens). Columns the cache does not
hold yet at the chosen step are NaN (blank). Also: which query heads share which KV head (GQA), and the decode step
measured against the context (engine/labs/context_sweep.py), beside what its bytes alone would predict.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures.attention_matrix import token_pieces
from ui.figures.theme import (
    DECODE_COLOR,
    ESTIMATE_DASH,
    FONT_SIZE,
    NEUTRAL_COLOR,
    PREFILL_COLOR,
    TITLE_SIZE,
    base_layout,
)
from ui.text.phase_numbers import tick_labels

KV_SCALE = "Viridis"


def kv_matrix(trace, kind: str = "keys", kv_head: int | None = None) -> np.ndarray:
    """(layers, tokens) norms for one KV head, or the mean over KV heads when kv_head is None."""
    norms = trace.kv_key_norms if kind == "keys" else trace.kv_value_norms
    norms = np.asarray(norms, dtype=np.float32)  # (L, K, S)
    return norms.mean(axis=1) if kv_head is None else norms[:, kv_head]


def kv_cache_figure(trace, position: int, kv_head: int | None = None, height: int = 560, compact: bool = False) -> go.Figure:
    """Keys (top) and values (bottom), layers × tokens, filled up to the T+p tokens cached at position p.

    compact (presenter mode): a short title and no token labels under the columns (the page shows the text).

    Orange band = prompt columns (written together by prefill); blue band = generated columns (one per
    decode step); the outlined column(s) = what this step wrote.
    """
    keys, values = kv_matrix(trace, "keys", kv_head), kv_matrix(trace, "values", kv_head)  # (L, S)
    n_layers, n_tokens = keys.shape
    T = trace.n_prompt
    cached = min(n_tokens, T + max(0, position))  # tokens held after this position's step
    pieces = token_pieces(trace)[:n_tokens]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for row, (name, matrix) in enumerate((("keys", keys), ("values", values)), start=1):
        shown = matrix.copy()
        shown[:, cached:] = np.nan  # not in the cache yet
        fig.add_trace(go.Heatmap(
            z=shown, x=list(range(n_tokens)), y=list(range(n_layers)), colorscale=KV_SCALE,
            zmin=float(np.nanmin(matrix)), zmax=float(np.nanmax(matrix)), hoverongaps=False,
            colorbar=dict(title=dict(text=f"‖{name[0]}‖", side="right"), len=0.44, y=0.79 if row == 1 else 0.21,
                          thickness=16),
            hovertemplate=f"{name}: layer %{{y}}, token %{{x}}<br>norm %{{z:.2f}}<extra></extra>",
        ), row=row, col=1)
        fig.update_yaxes(title=dict(text=f"{name}: layer"), autorange="reversed", row=row, col=1, showgrid=False)
    # phase bands above the keys panel, and the column(s) written at this position
    written = (0, T) if position <= 0 else (cached - 1, cached)
    for x0, x1, color in ((0, min(T, cached), PREFILL_COLOR), (T, cached, DECODE_COLOR)):
        if x1 > x0:
            fig.add_shape(type="rect", xref="x", yref="paper", x0=x0 - 0.5, x1=x1 - 0.5, y0=1.0, y1=1.03,
                          fillcolor=color, line_width=0)
    for axis in ("y", "y2"):
        fig.add_shape(type="rect", xref="x", yref=f"{axis} domain", x0=written[0] - 0.5, x1=written[1] - 0.5,
                      y0=0, y1=1, line=dict(color="#D62728", width=3), fillcolor="rgba(0,0,0,0)")
    fig.add_vline(x=T - 0.5, line=dict(color=NEUTRAL_COLOR, width=2, dash="dot"))
    tv, tt = tick_labels(pieces[:cached], max_labels=40)  # label only what the cache holds so far
    fig.update_xaxes(range=[-0.5, n_tokens - 0.5], showgrid=False)
    fig.update_xaxes(tickmode="array", tickvals=tv, ticktext=tt, tickangle=-60, tickfont=dict(size=FONT_SIZE - 4),
                     title=dict(text="cached token (orange band = prompt, blue band = generated)"), row=2, col=1)
    who = "mean over KV heads" if kv_head is None else f"KV head {kv_head}"
    title = (f"KV cache: {cached} of {n_tokens} tokens × {n_layers} layers" if compact
             else f"KV cache: {cached} of {n_tokens} tokens cached ({who})")
    layout = base_layout(title, "", "", height)
    layout.pop("xaxis"), layout.pop("yaxis")
    fig.update_layout(**layout)
    fig.update_layout(margin=dict(l=70, r=30, t=90, b=40 if compact else 110))
    if compact:  # no legend: exactly `height` high; short axis titles, no colour bars (too short to read)
        fig.update_xaxes(showticklabels=False, title=dict(text="cached tokens →"), row=2, col=1)
        fig.update_yaxes(title=dict(text="K"), row=1, col=1)
        fig.update_yaxes(title=dict(text="V"), row=2, col=1)
        fig.update_traces(showscale=False)
        fig.update_layout(height=height, margin=dict(l=70, r=30, t=70, b=40))
    return fig


def gqa_groups(n_heads: int, n_kv_heads: int) -> list[int]:
    """For each query head, the KV head it reads (grouped-query attention: consecutive groups of H/K)."""
    group = max(1, n_heads // max(1, n_kv_heads))
    return [min(h // group, n_kv_heads - 1) for h in range(n_heads)]


def gqa_figure(n_heads: int, n_kv_heads: int, height: int = 300) -> go.Figure:
    """Query heads (top row) wired to the KV heads they share (bottom row)."""
    groups = gqa_groups(n_heads, n_kv_heads)
    q_x = np.linspace(0, 1, n_heads) if n_heads > 1 else np.array([0.5])
    kv_x = np.array([np.mean(q_x[[h for h in range(n_heads) if groups[h] == k]]) for k in range(n_kv_heads)])
    fig = go.Figure()
    for h, k in enumerate(groups):
        fig.add_trace(go.Scatter(x=[q_x[h], kv_x[k]], y=[1, 0], mode="lines", line=dict(color=NEUTRAL_COLOR, width=2),
                                 hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=q_x, y=np.ones(n_heads), mode="markers+text", text=[f"Q{h}" for h in range(n_heads)],
                             textposition="top center", marker=dict(size=26, color="#555555", symbol="circle"),
                             name=f"{n_heads} query heads", textfont=dict(size=FONT_SIZE - 2)))
    fig.add_trace(go.Scatter(x=kv_x, y=np.zeros(n_kv_heads), mode="markers+text",
                             text=[f"KV{k}" for k in range(n_kv_heads)], textposition="bottom center",
                             marker=dict(size=34, color="#6A4C93", symbol="square"),
                             name=f"{n_kv_heads} cached K/V heads", textfont=dict(size=FONT_SIZE - 2)))
    share = n_heads // max(1, n_kv_heads)
    title = (f"{n_heads} query heads, each with its own KV head (no grouped-query attention)" if share <= 1 else
             f"{n_heads} query heads share {n_kv_heads} KV head{'s' if n_kv_heads > 1 else ''} ({share} per KV head)")
    layout = base_layout(title, "", "", height)
    fig.update_layout(**layout)
    fig.update_layout(title=dict(font=dict(size=TITLE_SIZE - 2)))
    fig.update_xaxes(visible=False, range=[-0.08, 1.08])
    fig.update_yaxes(visible=False, range=[-0.6, 1.6])
    return fig


def context_figure(sweep, height: int = 420) -> go.Figure:
    """Measured decode step (median of the rounds; bar: fastest to slowest round) against the tokens in the KV cache,
    and the estimate from bytes alone: the shortest context's step scaled by (weights + cache) / (weights + its
    cache), a straight line whose slope is the cache's bytes per token."""
    pts = [p for p in sweep.points if p.step.n]
    fig = go.Figure()
    if pts:
        x = [p.context for p in pts]
        y = [p.step.median * 1e3 for p in pts]
        fig.add_scatter(x=x, y=y, mode="markers+lines", name="decode step (measured, median)",
                        marker=dict(size=11, color=DECODE_COLOR), line=dict(color=DECODE_COLOR, width=3),
                        error_y=dict(type="data", symmetric=False, thickness=2,
                                     array=[p.step.high * 1e3 - v for p, v in zip(pts, y)],
                                     arrayminus=[v - p.step.low * 1e3 for p, v in zip(pts, y)]))
        base = sweep.weight_bytes + pts[0].kv_bytes
        fig.add_scatter(x=x, y=[y[0] * (sweep.weight_bytes + p.kv_bytes) / base for p in pts], mode="lines",
                        name="if only the bytes counted (estimate)", line=dict(color=NEUTRAL_COLOR, dash=ESTIMATE_DASH,
                                                                              width=2))
    fig.update_layout(**base_layout("Each decode step reads the whole KV cache: its time grows with the context",
                                    "tokens in the KV cache", "decode step (ms)", height=height))
    fig.update_yaxes(rangemode="tozero")
    return fig
