"""Figures for the fleet planner: the bill split by stage per policy.

Streamlit-free: plotly Figures built from engine.perfmodel's planner results.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ui.figures.theme import DECODE_COLOR, PREFILL_COLOR, base_layout


def money_figure(plans: dict, names: dict) -> go.Figure:
    """Cost per million tokens per policy, stacked: the valley's cards (prefill) and the bridge's cards (decode)."""
    labels = [names[k] for k in plans]
    fig = go.Figure()
    for stage, color in (("prefill", PREFILL_COLOR), ("decode", DECODE_COLOR)):
        values = [p.cost_per_million * p.money[stage] for p in plans.values()]
        word = "valley (prefill)" if stage == "prefill" else "bridge (decode)"
        fig.add_bar(y=labels, x=values, orientation="h", name=word, marker_color=color,
                    text=[f"{p.money[stage]:.0%}" for p in plans.values()], textposition="inside")
    fig.update_layout(**base_layout("Who eats the money: cost per million tokens by stage (estimate)",
                                    "cost per million tokens (prompt + output)", "", height=360), barmode="stack")
    return fig
