"""Charts for "Where the time goes": each phase's time by kind of work (GEMM vs GEMV) and by model part."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.labs.profiling import KIND_ATTN, KIND_GEMM, KIND_GEMV, KIND_OTHER, KIND_OUTSIDE, PARTS
from ui.figures.theme import DECODE_COLOR, NEUTRAL_COLOR, PREFILL_COLOR, base_layout

KIND_COLORS = {KIND_GEMM: PREFILL_COLOR, KIND_GEMV: DECODE_COLOR, KIND_ATTN: "#8E44AD", KIND_OTHER: "#B8B8B8",
               KIND_OUTSIDE: NEUTRAL_COLOR}
PART_COLORS = {"attention": "#8E44AD", "MLP": "#2E9E5B", "LM head": "#C0392B", "other": "#B8B8B8"}


def _phase_labels(result) -> list[str]:
    return [f"prefill ({result.n_prompt} tokens)", "decode (1 token)"]


def _stacked(result, key: str, categories, colors: dict, title: str) -> go.Figure:
    phases = (result.prefill, result.decode)
    fig = go.Figure()
    for cat in categories:
        shares = [getattr(p, key).get(cat, 0.0) / p.wall_ms * 100 if p.wall_ms else 0.0 for p in phases]
        fig.add_bar(x=_phase_labels(result), y=shares, name=cat, marker_color=colors[cat],
                    text=[f"{s:.0f}%" if s >= 4 else "" for s in shares], textposition="inside",
                    customdata=[getattr(p, key).get(cat, 0.0) for p in phases],
                    hovertemplate="%{x}<br>" + cat + ": %{y:.1f}% (%{customdata:.2f} ms)<extra></extra>")
    fig.update_layout(**base_layout(title, "", "share of the phase's wall time (%)", height=480), barmode="stack")
    fig.update_yaxes(range=[0, 100])
    return fig


def kinds_figure(result) -> go.Figure:
    return _stacked(result, "by_kind", (KIND_GEMM, KIND_GEMV, KIND_ATTN, KIND_OTHER, KIND_OUTSIDE), KIND_COLORS,
                    "Kind of work per phase (measured)")


def parts_figure(result) -> go.Figure:
    return _stacked(result, "by_part", PARTS, PART_COLORS, "Part of the model per phase (measured)")


def times_table(result) -> pd.DataFrame:
    """Milliseconds per phase and kind, absolute: prefill is one pass, decode one step."""
    rows = []
    for p, label in zip((result.prefill, result.decode), _phase_labels(result)):
        rows.append({"phase": label, "wall (ms)": round(p.wall_ms, 2), **{k: round(v, 2) for k, v in p.by_kind.items()}})
    return pd.DataFrame(rows)


def top_ops_table(phase, n: int = 12) -> pd.DataFrame:
    rows = [{"operator": o.name, "kind": o.kind, "part": o.part, "calls": round(o.calls, 1),
             "self time (ms)": round(o.self_ms, 3), "share of wall": f"{o.share:.1%}"} for o in phase.ops[:n]]
    return pd.DataFrame(rows, columns=["operator", "kind", "part", "calls", "self time (ms)", "share of wall"])
