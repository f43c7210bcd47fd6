"""Figures of the card model: a request's cost by stage at two batch sizes, a two-card comparison, the KV-cache wall.

Streamlit-free: plotly Figures from ui/text/card_numbers.py's values. Estimates are drawn hatched, as elsewhere.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.perfmodel.card_model import Cost
from ui.figures.theme import DECODE_COLOR, NEUTRAL_COLOR, PREFILL_COLOR, base_layout
from ui.text.card_numbers import Comparison, comparison_headline


def cost_figure(costs: list[Cost], card_name: str) -> go.Figure:
    """Device-milliseconds one request costs, prefill and decode stacked, one bar per batch size."""
    labels = [f"B = {c.batch}" for c in costs]
    fig = go.Figure()
    fig.add_bar(y=labels, x=[c.prefill_s * 1e3 for c in costs], orientation="h", name="valley (prefill)",
                marker_color=PREFILL_COLOR, marker_pattern_shape="/", text=[f"{c.prefill_share:.0%}" for c in costs],
                textposition="inside")
    fig.add_bar(y=labels, x=[c.decode_s * 1e3 for c in costs], orientation="h", name="bridge (decode)",
                marker_color=DECODE_COLOR, marker_pattern_shape="/", text=[f"{1 - c.prefill_share:.0%}" for c in costs],
                textposition="inside")
    fig.update_layout(**base_layout(f"Which stage eats the money: one request on {card_name} (estimate)",
                                    "device-milliseconds per request", "", height=320), barmode="stack")
    fig.update_yaxes(autorange="reversed")
    return fig


def comparison_figure(c: Comparison) -> go.Figure:
    """Speed-up of each stage from one card to the other, beside the spec sheets' FLOP/s and bandwidth ratios."""
    names = ["valley (TTFT)", "bridge (TPOT)", "spec: FLOP/s", "spec: bandwidth"]
    values = [c.prefill_speedup, c.decode_speedup, c.flops_ratio, c.bandwidth_ratio]
    colors = [PREFILL_COLOR, DECODE_COLOR, NEUTRAL_COLOR, NEUTRAL_COLOR]
    fig = go.Figure()
    fig.add_bar(x=names, y=values, marker_color=colors, marker_pattern_shape=["/", "/", "", ""],
                text=[f"x{v:.2f}" for v in values], textposition="outside", showlegend=False)
    fig.add_hline(y=1.0, line=dict(color=NEUTRAL_COLOR, width=1))
    fig.update_layout(**base_layout(f"{c.slow} -> {c.fast}: {comparison_headline(c)} (estimate)", "",
                                    "speed-up (x)", height=380))
    fig.update_yaxes(range=[0, max(values) * 1.25])
    return fig


def kv_wall_figure(table: pd.DataFrame, card_name: str, tokens: int) -> go.Figure:
    """Most sequences the card holds per model: with its own KV heads, and with one KV head per query head."""
    fig = go.Figure()
    fig.add_bar(x=table["model"], y=table["most sequences"], name="as built (grouped-query attention where it has it)",
                marker_color=DECODE_COLOR, marker_pattern_shape="/")
    fig.add_bar(x=table["model"], y=table["most sequences with one KV head per query head"],
                name="one KV head per query head", marker_color=NEUTRAL_COLOR, marker_pattern_shape="/")
    fig.update_layout(**base_layout(f"The KV-cache wall: sequences of {tokens:,} tokens on {card_name} (estimate)", "",
                                    "most sequences beside the weights", height=400), barmode="group")
    return fig


def context_figure(table: pd.DataFrame, model: str, card_name: str, batch: int) -> go.Figure:
    """The card model's decode step against the context: a straight line whose slope is the KV cache's bytes."""
    fig = go.Figure()
    fig.add_scatter(x=table["context (tokens)"], y=table["TPOT (ms, est.)"], mode="lines+markers",
                    name="decode step (estimate)", line=dict(color=DECODE_COLOR, width=3, dash="dash"))
    fig.update_layout(**base_layout(f"{model} on {card_name}, B = {batch}: each step reads the whole cache (estimate)",
                                    "context (tokens in the KV cache)", "TPOT (ms)", height=380))
    fig.update_yaxes(rangemode="tozero")
    return fig
