"""Figures and tables for the sweep and batch labs: TTFT grows with the prompt, a decode step with the context.

Streamlit-free: every function takes engine results and returns a plotly Figure, a DataFrame or text. A point is the
median of its repeated runs; its error bar spans the fastest to the slowest run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.labs.sweeps import SweepPoint, SweepResult, median_step_by_context
from engine.perfmodel.fit import TTFTFit
from ui.figures.theme import DECODE_COLOR, ESTIMATE_DASH, NEUTRAL_COLOR, PREFILL_COLOR, base_layout, error_bars

MS = 1000.0
COLUMNS = {  # SweepPoint field -> table heading (times in ms)
    "batch_size": "batch", "prompt_tokens": "prompt tokens", "output_tokens": "output tokens",
    "ttft_s": "TTFT (ms)", "tpot_s": "TPOT (ms)", "itl_p50_s": "ITL p50 (ms)", "decode_s": "decode total (ms)",
    "total_s": "end-to-end (ms)", "prefill_tokens_per_s": "prefill tok/s", "decode_tokens_per_s": "decode tok/s",
}


def _is_seconds(key: str) -> bool:
    """ttft_s, decode_s ... are seconds (shown in ms); prefill_tokens_per_s is a rate and stays as it is."""
    return key.endswith("_s") and not key.endswith("_per_s")


EXTRA = ("runs", "TTFT runs apart", "TPOT runs apart", "CPU wait", "decode path")


def _apart(r) -> float:
    return round(r.spread * 100, 1) if r.n >= 2 else float("nan")


def sweep_table(points: list[SweepPoint], separate: list[SweepPoint] | None = None) -> pd.DataFrame:
    """One row per measured point (medians; times in milliseconds), how far its runs lie apart (%), the share of its
    timed work its runs waited for a CPU (%), and its decode path; `separate` points (another path) follow."""
    rows = []
    for p in list(points) + list(separate or []):
        row = p.row()
        out = {label: (row[key] * MS if _is_seconds(key) else row[key]) for key, label in COLUMNS.items()}
        wait = p.cpu_wait
        out.update({"runs": p.runs, "TTFT runs apart": _apart(p.ttft), "TPOT runs apart": _apart(p.tpot),
                    "CPU wait": round(wait.share * 100, 1) if wait is not None and wait.measured else float("nan"),
                    "decode path": p.decode_path})
        rows.append(out)
    return pd.DataFrame(rows, columns=[*COLUMNS.values(), *EXTRA]).round(2)


def sweep_csv(points: list[SweepPoint], separate: list[SweepPoint] | None = None) -> bytes:
    return sweep_table(points, separate).to_csv(index=False).encode()


def sweep_status(result: SweepResult | None, interrupted: bool = False) -> str:
    """'cancelled after N points' or 'N of M points measured, R rounds' — what the table holds."""
    if result is None:
        return "No measurements yet."
    rounds = getattr(result, "rounds_done", 1)
    if result.cancelled or interrupted:
        return (f"Cancelled after {result.done} of {len(result.planned)} points ({rounds} full round(s) of "
                f"{getattr(result, 'repeats', 1)}); the runs measured so far are kept.")
    return (f"{result.done} of {len(result.planned)} points measured on {result.model} ({result.device}), "
            f"{rounds} round(s): each point the median of its runs.")


def ttft_figure(points: list[SweepPoint], fit: TTFTFit | None) -> go.Figure:
    """Measured TTFT against prompt length, with the fitted a + bT + cT² and its linear part."""
    t = np.array([p.prompt_tokens for p in points], dtype=float)
    y = np.array([p.ttft_s for p in points]) * MS
    fig = go.Figure()
    fig.add_scatter(x=t, y=y, mode="markers+lines", name="measured TTFT (median; bar: fastest to slowest run)",
                    marker=dict(size=12, color=PREFILL_COLOR), line=dict(color=PREFILL_COLOR, width=2),
                    error_y=error_bars(list(y), [[v * MS for v in p.ttft_runs] for p in points]))
    if fit is not None and t.size:
        grid = np.linspace(0, t.max(), 100)
        fig.add_scatter(x=grid, y=fit.predict(grid) * MS, mode="lines", name="fit a + b·T + c·T²",
                        line=dict(color=NEUTRAL_COLOR, dash=ESTIMATE_DASH, width=3))
        fig.add_scatter(x=grid, y=(fit.a + fit.b * grid) * MS, mode="lines", name="linear part a + b·T",
                        line=dict(color=NEUTRAL_COLOR, dash="dot", width=2))
    fig.update_layout(**base_layout("TTFT grows with the prompt (the valley widens)", "prompt length (tokens)",
                                    "TTFT (ms)", height=440))
    fig.update_yaxes(rangemode="tozero")
    return fig


def decode_latency_figure(points: list[SweepPoint]) -> go.Figure:
    """Median decode-step latency against context length: it grows with the KV cache each step reads (slowly while
    the cache is small next to the weights)."""
    pairs = median_step_by_context(points)
    fig = go.Figure()
    if pairs:
        x, y = zip(*pairs)
        fig.add_scatter(x=list(x), y=[v * MS for v in y], mode="markers", name="decode step (median, measured)",
                        marker=dict(size=9, color=DECODE_COLOR))
    fig.update_layout(**base_layout("Decode step latency against context (each step reads the whole KV cache)",
                                    "context length (tokens)",
                                    "decode step latency (ms)", height=440))
    fig.update_yaxes(rangemode="tozero")
    return fig


def phase_split_figure(points: list[SweepPoint], by: str = "prompt_tokens") -> go.Figure:
    """End-to-end time per point, stacked: prefill (TTFT) below, decode above."""
    labels = [f"{getattr(p, by)}" for p in points]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[p.ttft_s * MS for p in points], name="prefill (TTFT)", marker_color=PREFILL_COLOR)
    fig.add_bar(x=labels, y=[p.decode_s * MS for p in points], name="decode (all steps)", marker_color=DECODE_COLOR)
    axis = {"prompt_tokens": "prompt length (tokens)", "output_tokens": "output length (tokens)"}.get(by, by)
    fig.update_layout(**base_layout("Where the time goes, per run", axis, "time (ms)", height=440), barmode="stack")
    fig.update_xaxes(type="category")
    return fig


# ---- batch lab ------------------------------------------------------------------------------------


def batch_throughput_figure(points: list[SweepPoint], separate: list[SweepPoint] | None = None) -> go.Figure:
    """Tokens per second of each phase against batch size (log-log), medians with each point's fastest and slowest
    run; a point on another decode path (a Run's fused batch-1 step) drawn apart, unjoined."""
    pts = sorted(points, key=lambda p: p.batch_size)
    b = [p.batch_size for p in pts]
    fig = go.Figure()
    pre, dec = [p.prefill_tokens_per_s for p in pts], [p.decode_tokens_per_s for p in pts]
    fig.add_scatter(x=b, y=pre, mode="markers+lines", name="prefill tokens/s", marker=dict(size=12, color=PREFILL_COLOR),
                    line=dict(color=PREFILL_COLOR, width=3), error_y=error_bars(pre, [p.prefill_rates() for p in pts]))
    fig.add_scatter(x=b, y=dec, mode="markers+lines", name="decode tokens/s", marker=dict(size=12, color=DECODE_COLOR),
                    line=dict(color=DECODE_COLOR, width=3), error_y=error_bars(dec, [p.decode_rates() for p in pts]))
    if b:
        ideal = [pts[0].decode_tokens_per_s * x / b[0] for x in b]
        fig.add_scatter(x=b, y=ideal, mode="lines", name="decode if steps stayed flat",
                        line=dict(color=DECODE_COLOR, dash=ESTIMATE_DASH, width=2))
    for p in separate or []:
        fig.add_scatter(x=[p.batch_size], y=[p.decode_tokens_per_s], mode="markers",
                        name=f"decode tokens/s on the {p.decode_path} (a Run's; another program)",
                        marker=dict(size=14, symbol="diamond-open", color=DECODE_COLOR, line=dict(width=3)))
    fig.update_layout(**base_layout("Throughput against batch size (measured)", "batch size B", "tokens per second",
                                    height=460))
    fig.update_xaxes(type="log", tickvals=b)
    fig.update_yaxes(type="log", dtick=1)
    return fig


def batch_latency_figure(points: list[SweepPoint], measured_cross: int | None, predicted_cross: int | None,
                         factor: float = 1.5, separate: list[SweepPoint] | None = None) -> go.Figure:
    """Decode step latency against batch size, with the measured and the predicted crossovers marked; a point on
    another decode path drawn apart."""
    pts = sorted(points, key=lambda p: p.batch_size)
    b = [p.batch_size for p in pts]
    fig = go.Figure()
    steps = [p.itl_p50_s * MS for p in pts]
    fig.add_scatter(x=b, y=steps, mode="markers+lines", name="decode step (median; bar: each run's TPOT)",
                    marker=dict(size=12, color=DECODE_COLOR), line=dict(color=DECODE_COLOR, width=3),
                    error_y=error_bars(steps, [[t * MS for t in p.tpot_runs] for p in pts]))
    for p in separate or []:
        fig.add_scatter(x=[p.batch_size], y=[p.itl_p50_s * MS], mode="markers",
                        name=f"{p.decode_path} (a Run's; another program)",
                        marker=dict(size=14, symbol="diamond-open", color=NEUTRAL_COLOR, line=dict(width=3)))
    if pts:
        fig.add_hline(y=factor * pts[0].itl_p50_s * MS, line=dict(color=NEUTRAL_COLOR, dash="dot"),
                      annotation_text=f"{factor}× the B={b[0]} step")
    runs = [t * MS for p in pts for t in p.tpot_runs if t == t]
    top = max(steps + runs + [p.itl_p50_s * MS for p in separate or []]
              + [factor * pts[0].itl_p50_s * MS if pts else 1.0]) * 1.1
    xs = [x for x in b + [measured_cross, predicted_cross] if x]
    lo, hi = np.log10(min(xs, default=1)), np.log10(max(xs, default=1))
    # each crossover's label low in the plot (the curve never goes below the B=1 step there), at its own height,
    # on the side of its line that faces the middle: labels of equal or close crossovers never collide or clip
    for x, name, dash, color, height in ((measured_cross, "measured crossover", "solid", DECODE_COLOR, 0.2),
                                         (predicted_cross, "predicted crossover (estimate)", ESTIMATE_DASH,
                                          NEUTRAL_COLOR, 0.07)):
        if x is not None:  # a vertical segment as a trace: robust on a log axis
            right_half = hi > lo and (np.log10(x) - lo) / (hi - lo) > 0.5
            fig.add_scatter(x=[x, x, x], y=[top, 0, height * top], mode="lines+text", name=f"{name}: B={x}",
                            text=["", "", f"B={x}"], textposition="middle left" if right_half else "middle right",
                            cliponaxis=False, line=dict(color=color, dash=dash, width=3))
    fig.update_layout(**base_layout("Decode step latency against batch size", "batch size B", "step latency (ms)",
                                    height=460))
    fig.update_xaxes(type="log", tickvals=b)
    fig.update_yaxes(range=[0, top])
    return fig
