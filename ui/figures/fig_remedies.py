"""Charts for the Remedies lab: each remedy's measured effect on TTFT (the valley) and TPOT (the bridge)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures.theme import DECODE_COLOR, FONT_SIZE, NEUTRAL_COLOR, PREFILL_COLOR, base_layout, error_bars
from ui.text import crossed_numbers
from ui.text.remedy_text import HELPS, MARKER_KEY, TITLES, effects


def kv_cache_figure(result) -> go.Figure:
    fig = go.Figure()
    for trace, name, color in ((result.uncached, "no cache: recompute everything", NEUTRAL_COLOR),
                               (result.cached, "KV cache", DECODE_COLOR)):
        fig.add_scatter(x=[s.kv_length for s in trace.steps], y=[s.seconds * 1e3 for s in trace.steps], mode="lines+markers",
                        name=name, line=dict(color=color, width=3))
    fig.update_layout(**base_layout("Decode step latency vs tokens in context (measured)", "tokens in context", "step latency (ms)"))
    return fig


def phase_pair_figure(rows, title: str) -> go.Figure:
    """Two panels: TTFT (prefill, orange) and TPOT (decode, blue) for each configuration: the median of its runs,
    with a bar from the fastest to the slowest run."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT — prefill (ms)", "TPOT — decode (ms per token)"))
    labels = [r.label for r in rows]
    ttft, tpot = [r.ttft_s * 1e3 for r in rows], [r.tpot_s * 1e3 for r in rows]
    fig.add_bar(x=labels, y=ttft, marker_color=PREFILL_COLOR, name="TTFT", text=[f"{v:.1f}" for v in ttft],
                textposition="outside", row=1, col=1,
                error_y=error_bars(ttft, [[t * 1e3 for t in getattr(r, "ttft_runs", [])] for r in rows]))
    fig.add_bar(x=labels, y=tpot, marker_color=DECODE_COLOR, name="TPOT", text=[f"{v:.1f}" for v in tpot],
                textposition="outside", row=1, col=2,
                error_y=error_bars(tpot, [[t * 1e3 for t in getattr(r, "tpot_runs", [])] for r in rows]))
    fig.update_layout(**base_layout(title, "", "milliseconds", height=440))
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title_text="milliseconds", rangemode="tozero")
    fig.update_annotations(font_size=FONT_SIZE)
    for ax, name in (("yaxis", "ttft"), ("yaxis2", "tpot")):
        values = [v for r in rows for v in (getattr(r, f"{name}_s"), *getattr(r, f"{name}_runs", [])) if v == v]
        top = max(values + [1e-9]) * 1e3
        fig.layout[ax].range = [0, top * 1.25]
    return fig


def speculative_figure(rows) -> go.Figure:
    fig = go.Figure()
    labels = [r.label for r in rows]
    fig.add_bar(x=labels, y=[r.greedy.tpot_s * 1e3 for r in rows], name="plain greedy", marker_color=NEUTRAL_COLOR)
    fig.add_bar(x=labels, y=[r.speculative.tpot_s * 1e3 for r in rows], name="prompt lookup", marker_color=DECODE_COLOR,
                text=[f"{r.tokens_per_pass:.2f} tok/pass, {r.acceptance_rate:.0%} accepted" for r in rows], textposition="outside")
    fig.update_layout(**base_layout("Time per output token (measured)", "prompt", "TPOT (ms per token)"), barmode="group")
    top = max([max(r.greedy.tpot_s, r.speculative.tpot_s) for r in rows] + [1e-9]) * 1e3
    fig.update_yaxes(range=[0, top * 1.3])
    return fig


def overhead_figure(result) -> go.Figure:
    math_ms = max(result.real_step_s - result.skeleton_step_s, 0.0) * 1e3
    fig = go.Figure()
    fig.add_bar(y=["decode step"], x=[math_ms], orientation="h", name="the model's math", marker_color=DECODE_COLOR)
    fig.add_bar(y=["decode step"], x=[result.skeleton_step_s * 1e3], orientation="h", name="overhead (skeleton step)",
                marker_color=NEUTRAL_COLOR)
    fig.update_layout(**base_layout("One decode step, split (measured)", "milliseconds", "", height=260), barmode="stack")
    return fig


REMEDY_ORDER = ("kv_cache", "speculative", "prefix", "dtype", "int8", "kernels")  # the lights' rows, in the tabs' order


def _label(key: str, result) -> str:
    if key == "speculative":
        return f"{TITLES['speculative']} — {result[0].label}"
    if key in ("dtype", "int8", "kernels"):
        rows = getattr(result, "rows", result)
        return f"{rows[1].label} (vs {rows[0].label})"
    return TITLES[key]


def _effects(history: dict) -> list[dict]:
    """One row per remedy measured so far: (remedy, meant for, the TTFT and TPOT Effects over its measurements).
    `history`: remedy key -> this session's measurements of it (a list, oldest first; a single result counts as one)."""
    rows = []
    for key in REMEDY_ORDER:
        runs = history.get(key)
        if not runs:
            continue
        runs = runs if isinstance(runs, list) else [runs]
        ttft, tpot = effects(key, runs)
        if ttft.verdict == "n/a" and tpot.verdict == "n/a":
            continue
        rows.append({"remedy": _label(key, runs[-1]), "meant for": HELPS[key][0], "TTFT": ttft, "TPOT": tpot})
    return rows


def effects_table(history: dict) -> pd.DataFrame:
    """The indicator lights as a table: each speed-up's median, how far apart its runs lie, their number and the
    verdict."""
    out = []
    for r in _effects(history):
        row = {"remedy": r["remedy"], "meant for": r["meant for"]}
        for phase in ("TTFT", "TPOT"):
            e = r[phase]
            row[f"{phase} speed-up"] = e.median
            row[f"{phase} runs apart"] = e.spread
            row[f"{phase} effect"] = e.verdict
        row["runs"] = max(len(r["TTFT"].measured), len(r["TPOT"].measured))
        out.append(row)
    columns = ["remedy", "meant for", "TTFT speed-up", "TTFT runs apart", "TTFT effect", "TPOT speed-up",
               "TPOT runs apart", "TPOT effect", "runs"]
    return pd.DataFrame(out, columns=columns)


LIGHT_SCALE = [[0.0, "#C0392B"], [0.4, "#E8B4AE"], [0.5, "#D9D9D9"], [0.6, "#A9DFBF"], [1.0, "#1E8449"]]


def _lights(z, columns: list[str], rows: list[str], text, title: str, empty_title: str) -> go.Figure:
    """Indicator lights: one row per remedy, each cell coloured by crossed_numbers.light (red slower, grey no verdict,
    green faster) and marked with its verdict in shape and word. `empty_title` alone when there is no row."""
    fig = go.Figure()
    if not rows:
        fig.update_layout(**base_layout(empty_title, "", "", height=260))
        return fig
    fig.add_heatmap(z=z, x=columns, y=rows, text=text, texttemplate="%{text}", textfont=dict(size=FONT_SIZE + 2),
                    colorscale=LIGHT_SCALE, zmin=-1, zmax=1, showscale=False, xgap=4, ygap=4)
    fig.update_layout(**base_layout(title, "", "", height=140 + 80 * len(rows)))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=FONT_SIZE - 2))
    fig.update_xaxes(side="top")
    return fig


def indicator_matrix_figure(history: dict) -> go.Figure:
    """Rows = remedies measured so far, columns = TTFT and TPOT, cells coloured by the verdict over this session's
    measurements and marked with it in shape and word (▲ helps, ▼ hurts, ● too close to tell, ○ once): the colour is
    never the only carrier."""
    rows = _effects(history)
    return _lights([[crossed_numbers.light(r["TTFT"]), crossed_numbers.light(r["TPOT"])] for r in rows],
                   ["TTFT (prefill)", "TPOT (decode)"], [f"{r['remedy']}  [{r['meant for']}]" for r in rows],
                   [[r[phase].marker() for phase in ("TTFT", "TPOT")] for r in rows],
                   f"Median speed-up this session: {MARKER_KEY}", "Measure some remedies first")


def crossed_figure(result) -> go.Figure:
    """The crossed experiment as indicator lights: remedies (with the segment each is for) by requests, each cell the
    end-to-end speed-up measured here with its verdict in shape and word (▲ faster, ▼ slower, ● no change beyond the
    rounds' spread, ○ too few rounds), coloured only where every round agreed."""
    rows, cols, z, text = crossed_numbers.matrix(result)
    return _lights(z, [f"{c} request" for c in cols], rows, text,
                   "End to end, measured here: each remedy on both kinds of request", "Nothing measured yet")
