"""Figures for the roofline and budget labs: where each phase sits under this machine's roof, and what money buys.

Streamlit-free: plotly Figures and pandas DataFrames built from engine.perfmodel (the roofline, the card model, the
budget).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.errors import EngineError
from engine.perfmodel import card_model as cm
from engine.perfmodel import roofline as rl
from engine.perfmodel.budget import BudgetResult
from ui.figures.theme import DECODE_COLOR, ESTIMATE_DASH, NEUTRAL_COLOR, PHASE_COLORS, PREFILL_COLOR, base_layout
from ui.text import card_numbers as cn

GIGA = 1e9


def roofline_figure(peak_flops: float, peak_bytes_per_s: float, points: list[rl.MeasuredPoint],
                    title: str = "This machine's roofline (measured peaks)") -> go.Figure:
    """Log-log: attainable GFLOP/s = min(peak, intensity x bandwidth); the measured phases as two dots."""
    ridge = peak_flops / peak_bytes_per_s
    lo = min([0.05, ridge / 100] + [p.intensity / 3 for p in points])
    hi = max([ridge * 100, 1000.0] + [p.intensity * 3 for p in points])
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig = go.Figure()
    fig.add_scatter(x=x, y=np.minimum(peak_flops, x * peak_bytes_per_s) / GIGA, mode="lines", name="roof (measured peaks)",
                    line=dict(color=NEUTRAL_COLOR, width=4))
    fig.add_scatter(x=[ridge], y=[peak_flops / GIGA], mode="markers+text", name=f"ridge point {ridge:.1f} FLOP/B",
                    text=[f"ridge {ridge:.1f} FLOP/byte"], textposition="top left", cliponaxis=False,
                    marker=dict(size=14, color=NEUTRAL_COLOR, symbol="diamond"))
    for p in points:
        fig.add_scatter(x=[p.intensity], y=[p.flops_per_s / GIGA], mode="markers+text",
                        name=f"{p.phase} (measured)", text=[p.phase], textposition="bottom center",
                        marker=dict(size=20, color=PHASE_COLORS.get(p.phase, NEUTRAL_COLOR), line=dict(width=2, color="white")))
    fig.update_layout(**base_layout(title, "arithmetic intensity (FLOP per byte moved)", "achieved GFLOP/s", height=500))
    fig.update_xaxes(type="log", dtick=1)
    # headroom above the roof (a decade): the ridge label sits up there, inside the plot
    y_lo = min([lo * peak_bytes_per_s] + [p.flops_per_s for p in points]) / GIGA
    fig.update_yaxes(type="log", dtick=1, range=[np.log10(y_lo) - 0.3, np.log10(peak_flops / GIGA) + 1.0])
    return fig


def points_table(points: list[rl.MeasuredPoint], peak_flops: float, peak_bytes_per_s: float) -> pd.DataFrame:
    rows = [{"phase": p.phase, "time (ms)": p.seconds * 1e3, "intensity (FLOP/byte, formula)": p.intensity,
             "achieved GFLOP/s": p.flops_per_s / GIGA, "% of measured matmul peak": 100 * p.flops_per_s / peak_flops,
             "achieved GB/s": p.bytes_per_s / GIGA, "% of measured copy bandwidth": 100 * p.bytes_per_s / peak_bytes_per_s}
            for p in points]
    return pd.DataFrame(rows).round(2)


def predictions(model: str, workload: rl.Workload, dtype: str = "float16", batch: int = 1,
                cards: dict | None = None) -> pd.DataFrame:
    """The card model's TTFT, TPOT and whole request for one workload on every card (this machine's measured card
    first when given); a card the model does not fit on says so, and on how many it would."""
    rows = []
    for name, card in (cards or cn.cards_with()).items():
        the_dtype = "float32" if card.device_class == "cpu" else dtype
        row = {"card": name, "from": cn.where_from(card)}
        try:
            s = cn.setup(model, card, the_dtype)
            p = cm.plan(s, workload.prompt_tokens, workload.output_tokens, batch)
        except EngineError as e:
            rows.append({**row, "fits": f"no: {e}"})
            continue
        rows.append({**row, "TTFT (ms, est.)": p.ttft_s * 1e3, "TPOT (ms, est.)": p.tpot_s * 1e3,
                     "total (s, est.)": p.total_s, "prefill share": p.prefill_share,
                     "prefill bound by": p.prefill.bound, "decode bound by": p.decode.bound, "fits": "yes"})
    return pd.DataFrame(rows).round(3)


def prediction_bars(table: pd.DataFrame, title: str) -> go.Figure:
    """Horizontal 100% bars: each card's estimated time split into prefill and decode, total written beside."""
    table = table[table["fits"] == "yes"]
    share = 100 * table["prefill share"]
    totals = [f"{t:.3g} s" for t in table["total (s, est.)"]]
    fig = go.Figure()
    fig.add_bar(y=table["card"], x=share, orientation="h", name="prefill share (estimate)", marker_color=PREFILL_COLOR,
                marker_pattern_shape="/")
    fig.add_bar(y=table["card"], x=100 - share, orientation="h", name="decode share (estimate)", marker_color=DECODE_COLOR,
                marker_pattern_shape="/", text=totals, textposition="inside", insidetextanchor="end",
                textfont=dict(color="white", size=16))
    fig.update_layout(**base_layout(title, "% of estimated end-to-end time (total at right)", "", height=480),
                      barmode="stack")
    fig.update_xaxes(range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return fig


def workload_shares(model: str, card, dtype: str = "float16", batches: tuple[int, ...] = (1, 64)) -> pd.DataFrame:
    """For one card: each workload preset's estimated share of a request's device-seconds spent in prefill, alone and
    among riders (a decode step is shared, a prefill is not)."""
    rows = []
    for w in rl.WORKLOAD_PRESETS.values():
        row = {"workload": w.name, "in / out tokens": f"{w.prompt_tokens} / {w.output_tokens}"}
        try:
            for c in cn.cost_split(model, card, w.prompt_tokens, w.output_tokens, batches, dtype):
                row[f"prefill's share of the cost, B = {c.batch} (est.)"] = round(c.prefill_share, 3)
        except EngineError as e:
            row["note"] = str(e)
        rows.append(row)
    return pd.DataFrame(rows)


def budget_figure(result: BudgetResult) -> go.Figure:
    """Before and after, each bar split into valley and bridge, as % of the original journey."""
    labels = ["before", "after"]
    fig = go.Figure()
    fig.add_bar(x=[100 * result.prefill_share, 100 * result.new_prefill], y=labels, orientation="h",
                name=f"valley (prefill) ×{result.prefill_speedup:g}", marker_color=PREFILL_COLOR)
    fig.add_bar(x=[100 * (1 - result.prefill_share), 100 * result.new_decode], y=labels, orientation="h",
                name=f"bridge (decode) ×{result.decode_speedup:g}", marker_color=DECODE_COLOR)
    fig.add_vline(x=100 * result.new_time, line=dict(color=NEUTRAL_COLOR, dash=ESTIMATE_DASH, width=2),
                  annotation_text=f"saves {result.saving:.0%}", annotation_position="bottom right")
    fig.update_layout(**base_layout("Old Qin's ledger: the journey before and after", "% of the original end-to-end time",
                                    "", height=360), barmode="stack", legend_traceorder="normal")
    fig.update_xaxes(range=[0, 105])
    fig.update_yaxes(autorange="reversed")
    return fig


def budget_curve(prefill_share: float, max_speedup: float = 8.0) -> go.Figure:
    """Saving against speed-up when only one segment gets faster: the valley's curve flattens at its share."""
    s = np.linspace(1, max_speedup, 60)
    fig = go.Figure()
    fig.add_scatter(x=s, y=100 * (prefill_share - prefill_share / s), mode="lines", name="speed up only the valley",
                    line=dict(color=PREFILL_COLOR, width=4))
    fig.add_scatter(x=s, y=100 * ((1 - prefill_share) - (1 - prefill_share) / s), mode="lines",
                    name="speed up only the bridge", line=dict(color=DECODE_COLOR, width=4))
    fig.update_layout(**base_layout(f"Saving against speed-up (prefill share {prefill_share:.0%})", "speed-up factor ×",
                                    "end-to-end time saved (%)", height=400))
    fig.update_yaxes(range=[0, 100])
    return fig
