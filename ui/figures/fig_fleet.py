"""Figures for the fleet planner: the step model's fit against measured steps, and the bill split by stage per policy.

Streamlit-free: plotly Figures built from engine.perfmodel's step model and planner results.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ui.figures.theme import DECODE_COLOR, ESTIMATE_DASH, NEUTRAL_COLOR, PHASE_COLORS, PREFILL_COLOR, base_layout


def fit_figure(residuals: list) -> go.Figure:
    """Measured step seconds against the fitted ones (ms), one dot per step; on the diagonal = a perfect fit."""
    fig = go.Figure()
    for kind in ("prefill", "decode", "mixed"):
        pts = [(r[3] * 1e3, r[2] * 1e3, r[1]) for r in residuals if r[0] == kind]  # (kind, tokens, measured, fitted, ...)
        if not pts:
            continue
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=f"{kind} steps (measured)",
                        text=[f"{p[2]} tokens" for p in pts],
                        marker=dict(size=9, color=PHASE_COLORS.get(kind, NEUTRAL_COLOR), opacity=0.7))
    top = max([max(r[2], r[3]) * 1e3 for r in residuals] or [1.0])
    fig.add_scatter(x=[0, top], y=[0, top], mode="lines", name="fitted = measured",
                    line=dict(color=NEUTRAL_COLOR, dash=ESTIMATE_DASH))
    fig.update_layout(**base_layout("The step model against this machine's steps", "fitted step (ms)",
                                    "measured step (ms)", height=420))
    return fig


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
