"""Attention as pictures: the T×T causal matrix prefill fills at once, and the rows decode adds one by one.

Streamlit-free Plotly builders over the matrices of ui/figures/attention_matrix.py (masked cells NaN, so blank; long
sequences average-pooled into blocks so a figure stays light). Layers are named by their number in the model.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.attention_matrix import block_size, colour_values, full_matrix, history_row, pool, prefill_matrix, token_pieces
from ui.figures.theme import DECODE_COLOR, FONT_SIZE, PREFILL_COLOR, base_layout
from ui.text.phase_numbers import plot_label, tick_labels

MAX_SIDE = 160  # largest matrix side drawn cell by cell; longer sequences are pooled
MAX_SIDE_ANIMATION = 120  # frames repeat the data, so the animation is pooled sooner
PREFILL_SCALE = [[0.0, "#FFFFFF"], [1.0, PREFILL_COLOR]]
DECODE_SCALE = [[0.0, "#FFFFFF"], [1.0, DECODE_COLOR]]
MIN_DECODE_CELLS = 8  # decode rows keep at least this many pooled rows (or one each), however long the prompt
FEW_GENERATED = 0.05  # generated keys under this share of a row's bars are highlighted (too thin to see)


def _axis_ticks(pieces: list[str], block: int, max_labels: int = 32) -> tuple[list[float], list[str]]:
    """Tick positions in (pooled) cell units with readable token texts."""
    positions, texts = tick_labels(pieces, max_labels=max_labels)
    return [p / block for p in positions], texts


def _matrix_layout(fig: go.Figure, title: str, pieces: list[str], block: int, height: int,
                   y_ticks: tuple[list[float], list[str]] | None = None) -> None:
    fig.update_layout(**base_layout(title, "key position: the token being looked at",
                                    "query position: the token looking", height))
    xt, xs = _axis_ticks(pieces, block)
    yt, ys = y_ticks or (xt, xs)
    fig.update_xaxes(tickmode="array", tickvals=xt, ticktext=xs, tickangle=-60, tickfont=dict(size=FONT_SIZE - 4),
                     showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(tickmode="array", tickvals=yt, ticktext=ys, tickfont=dict(size=FONT_SIZE - 4),
                     autorange="reversed", showgrid=False, zeroline=False, scaleanchor="x", constrain="domain")
    fig.update_layout(plot_bgcolor="#F4F4F4")  # masked cells show this grey: visibly empty, not "zero"


def _hover_labels(pieces: list[str], block: int) -> list[str]:
    if block == 1:
        return [f"{i}: {plot_label(p, 16)}" for i, p in enumerate(pieces)]
    return [f"{i}–{min(i + block, len(pieces)) - 1}" for i in range(0, len(pieces), block)]


def attention_heatmap(trace, layer: int, head: int | None, scale: str = "linear", height: int = 640) -> go.Figure:
    """The prefill T×T causal attention of one layer and head (or the mean over heads), with a colour bar."""
    matrix = prefill_matrix(trace, layer, head)
    block = block_size(matrix.shape[0], MAX_SIDE)
    weights = pool(matrix, block)
    shown, zmin, zmax, ticks = colour_values(weights, scale)
    cells = list(range(shown.shape[0]))
    prompt_pieces = token_pieces(trace)[: trace.n_prompt]
    hover = _grid(_hover_labels(prompt_pieces, block), weights)
    fig = go.Figure(go.Heatmap(
        z=shown, x=cells, y=cells, colorscale=PREFILL_SCALE, zmin=zmin, zmax=zmax,
        colorbar=dict(title=dict(text="attention<br>weight"), thickness=18, **ticks), customdata=hover,
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{customdata[2]}<extra></extra>", hoverongaps=False,
    ))
    who = "mean over heads" if head is None else f"head {head}"
    pooled = f" · averaged in {block}×{block} token blocks" if block > 1 else ""
    _matrix_layout(fig, f"Prefill attention, layer {layer}, {who}: {matrix.shape[0]}×{matrix.shape[0]}{pooled}",
                   prompt_pieces, block, height)
    return fig


def _grid(labels: list[str], weights: np.ndarray) -> np.ndarray:
    """(n, n, 3) hover texts: [query label, key label, weight] for every cell."""
    n = len(labels)
    rows = np.repeat(np.array(labels, dtype=object)[:, None], n, axis=1)  # (n, n)
    values = np.array([["masked" if np.isnan(w) else f"{w:.4f}" for w in row] for row in weights], dtype=object)
    return np.stack([rows, rows.T, values], axis=-1)


def decode_row_block(n: int, block: int) -> int:
    """Rows per pooled decode row: like the prompt's `block`, but never so coarse that the n decode rows shrink to
    a sliver under a long prompt (1,024 prompt tokens, 8 new ones: 8 rows of their own, not one ninth-tall row)."""
    return max(1, min(block, n // MIN_DECODE_CELLS))


def _phase_parts(trace, layer: int, head: int | None, scale: str, max_side: int):
    """The matrix split for the two-phase pictures: prompt rows, a function for the first k decode rows.

    Columns and prompt rows are pooled in `block`s; decode rows in their own, possibly finer, blocks (drawn
    taller than the prompt's rows per token: `stretch`), so a handful of decode rows stays visible."""
    full = full_matrix(trace, layer, head)  # (T+n, T+n)
    T, n = trace.n_prompt, full.shape[0] - trace.n_prompt
    block = block_size(T + n, max_side)
    d_block = decode_row_block(n, block)
    _, zmin, zmax, ticks = colour_values(full, scale)
    pieces = token_pieces(trace)[: T + n]
    prompt_rows = pool(full[:T], block)  # (ceil(T/b), C)
    blank_decode = np.full((math.ceil(n / d_block), prompt_rows.shape[1]), np.nan, dtype=np.float32)

    def decode_part(k: int) -> np.ndarray:
        part = np.full((n, T + n), np.nan, dtype=np.float32)
        part[:k] = full[T: T + k]
        rows = pool(part, block, d_block) if n else blank_decode  # (ceil(n/d), C)
        return colour_values(np.vstack([np.full_like(prompt_rows, np.nan), rows]), scale)[0]

    x_cells = list(range(prompt_rows.shape[1]))
    y_cells = list(range(prompt_rows.shape[0] + blank_decode.shape[0]))
    common = dict(x=x_cells, y=y_cells, zmin=zmin, zmax=zmax, hoverongaps=False, hoverinfo="skip")
    bar = dict(thickness=14, title=dict(side="right"), **ticks)
    traces = [
        go.Heatmap(z=colour_values(np.vstack([prompt_rows, blank_decode]), scale)[0], colorscale=PREFILL_SCALE,
                   name="prefill rows", colorbar=dict(bar, x=1.0, title=dict(text="prefill", side="right")), **common),
        go.Heatmap(z=decode_part(0), colorscale=DECODE_SCALE, name="decode rows",
                   colorbar=dict(bar, x=1.13, title=dict(text="decode", side="right")), **common),
    ]
    positions, texts = tick_labels(pieces, max_labels=32)
    y_ticks = ([p / block if p < T else prompt_rows.shape[0] + (p - T) / d_block for p in positions], texts)
    parts = dict(pieces=pieces, block=block, stretch=block / d_block, y_ticks=y_ticks,
                 decode_top=prompt_rows.shape[0], decode_rows=blank_decode.shape[0])
    return traces, decode_part, x_cells, y_cells, parts, T, n


def _decode_outline(fig: go.Figure, parts: dict, n: int) -> None:
    """A blue frame around the decode rows' band, so even a few rows stand out below a long prompt."""
    if n:
        fig.add_shape(type="rect", xref="x domain", yref="y", x0=0, x1=1, y0=parts["decode_top"] - 0.5,
                      y1=parts["decode_top"] + parts["decode_rows"] - 0.5,
                      line=dict(color=DECODE_COLOR, width=2), fillcolor="rgba(0,0,0,0)")


def _stretch_note(parts: dict) -> str:
    """Said under the matrix when decode rows are drawn taller than the prompt's (see decode_row_block)."""
    return f" · decode rows drawn ×{parts['stretch']:.2g} taller" if parts["stretch"] > 1 else ""


def phase_animation(trace, layer: int, head: int | None, scale: str = "linear", height: int = 700) -> go.Figure:
    """Same matrix, two phases: frame 0 = prefill fills all T rows at once; frame k = k decode rows, one per step.

    Two heatmap traces share the axes: prompt rows in prefill orange, generated rows in decode blue.
    Frames only carry the decode trace, so frame count = 1 + decode steps.
    """
    traces, decode_part, x_cells, y_cells, parts, T, n = _phase_parts(trace, layer, head, scale, MAX_SIDE_ANIMATION)
    fig = go.Figure(traces)
    fig.frames = [go.Frame(data=[go.Heatmap(z=decode_part(k), x=x_cells, y=y_cells)], traces=[1], name=str(k))
                  for k in range(n + 1)]
    labels = ["prefill: all rows"] + [f"decode {k}" for k in range(1, n + 1)]
    steps = [dict(method="animate", label=label, args=[[str(k)], dict(mode="immediate", frame=dict(duration=0, redraw=True))])
             for k, label in enumerate(labels)]
    who = "mean over heads" if head is None else f"head {head}"
    _matrix_layout(fig, f"Layer {layer}, {who}: {T} prefill rows at once, then 1 decode row per step",
                   parts["pieces"], parts["block"], height, parts["y_ticks"])
    fig.update_xaxes(title=dict(text=_stretch_note(parts).lstrip(" ·")))
    fig.update_yaxes(title=dict(text="↓ queries"))
    _decode_outline(fig, parts, n)
    fig.update_layout(
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="frame: "), x=0.3, len=0.7, y=0, yanchor="top",
                     pad=dict(t=110), font=dict(size=14))],
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=0, xanchor="left", yanchor="top", pad=dict(t=140),
                          showactive=False, buttons=[
            dict(label="▶ Play", method="animate",
                 args=[None, dict(frame=dict(duration=400, redraw=True), transition=dict(duration=0), fromcurrent=True)]),
            dict(label="Pause", method="animate", args=[[None], dict(mode="immediate", frame=dict(duration=0))]),
        ])],
        margin=dict(l=70, r=120, t=70, b=190),
    )
    return fig


def phase_step_figure(trace, layer: int, head: int | None, step: int, scale: str = "linear",
                      height: int = 620) -> go.Figure:
    """One frame of `phase_animation` as a still (presenter mode steps through it): step 0 = the T prompt rows
    prefill fills at once, step k = k decode rows added one at a time."""
    traces, decode_part, _, _, parts, T, n = _phase_parts(trace, layer, head, scale, MAX_SIDE_ANIMATION)
    k = max(0, min(int(step), n))
    traces[1].z = decode_part(k)
    fig = go.Figure(traces)
    title = (f"Prefill: all {T} prompt rows in one pass (layer {layer})" if k == 0 else
             f"Decode step {k} of {n}: one new row, {T + k} keys (layer {layer})")
    _matrix_layout(fig, title, parts["pieces"], parts["block"], height, parts["y_ticks"])
    # for the back of the room: no token labels (the matrix is the point), colour bars apart
    fig.update_xaxes(showticklabels=False, title=dict(text="keys →" + _stretch_note(parts)))
    fig.update_yaxes(showticklabels=False, title=dict(text="↓ queries"))
    _decode_outline(fig, parts, n)
    fig.update_traces(colorbar_x=1.04, selector=dict(name="prefill rows"))
    fig.update_traces(colorbar_x=1.3, selector=dict(name="decode rows"))
    fig.update_layout(margin=dict(l=40, r=190, t=70, b=50), height=height)  # no legend: exactly `height` high
    return fig


def attention_row_figure(trace, position: int, layer: int, head: int | None, height: int = 380,
                         compact: bool = False) -> go.Figure:
    """Bars over the history: how much the new query attends to each cached token (prompt orange, generated blue).

    compact (presenter mode): exactly `height` high, a short title, no token labels under the bars."""
    row = history_row(trace, position, layer, head)
    T = trace.n_prompt
    pieces = token_pieces(trace)[: row.shape[0]]
    colors = [PREFILL_COLOR if i < T else DECODE_COLOR for i in range(row.shape[0])]
    hover = [f"{i}: {plot_label(p, 16)}" for i, p in enumerate(pieces)]
    fig = go.Figure(go.Bar(x=list(range(row.shape[0])), y=row, marker_color=colors, customdata=hover,
                           hovertemplate="%{customdata}<br>weight %{y:.3f}<extra></extra>"))
    who = "mean over heads" if head is None else f"head {head}"
    fig.update_layout(**base_layout(f"Where the new query looks (layer {layer}, {who}) — {row.shape[0]} cached tokens",
                                    "cached token (orange = prompt, blue = generated)", "attention weight", height))
    tv, tt = tick_labels(pieces, max_labels=36)
    fig.update_xaxes(tickmode="array", tickvals=tv, ticktext=tt, tickangle=-60, tickfont=dict(size=FONT_SIZE - 4))
    fig.update_layout(bargap=0.05, showlegend=False)
    if compact:
        fig.update_layout(title_text=f"Its attention over {row.shape[0]} cached tokens (layer {layer})", height=height,
                          margin=dict(l=70, r=30, t=60, b=50))
        fig.update_xaxes(showticklabels=False, title=dict(text="cached tokens →"))
        fig.update_yaxes(title=dict(text="weight"))
    _highlight_generated(fig, row, T)
    return fig


def _highlight_generated(fig: go.Figure, row: np.ndarray, T: int) -> None:
    """Behind a long prompt the few generated keys are bars a pixel wide: shade their band (at least 3 % of the
    width), mark each one's weight with a dot and say how many there are."""
    n, g = row.shape[0], row.shape[0] - T
    if g <= 0 or g / n >= FEW_GENERATED:
        return
    x0 = min(T - 0.5, n - 0.5 - 0.03 * n)  # the band ends at the last key and is never thinner than 3 %
    fig.add_vrect(x0=x0, x1=n - 0.5, fillcolor=DECODE_COLOR, opacity=0.15, line_width=0, layer="below")
    fig.add_trace(go.Scatter(x=list(range(T, n)), y=row[T:], mode="markers", marker=dict(color=DECODE_COLOR, size=9),
                             hovertemplate="generated token %{x}<br>weight %{y:.3f}<extra></extra>"))
    fig.add_annotation(x=x0, xanchor="right", y=1, yref="y domain", yanchor="top", showarrow=False,
                       text=f"{g} generated →", font=dict(color=DECODE_COLOR))
