"""The room's answers as a histogram, with the option the engine's measurement answers marked (shape and text too), and
the same counts as plain text for screen readers."""
from __future__ import annotations

import textwrap

import plotly.graph_objects as go

from ui.figures.theme import DECODE_COLOR, NEUTRAL_COLOR, base_layout

MEASURED_MARK = "◆ measured"  # beside the matched bar: text and a hatch, not colour alone


def poll_figure(labels: list[str], counts: list[int], matched: int | None = None, measured_text: str = "",
                title: str = "The room's predictions") -> go.Figure:
    """Horizontal bars (one per option, in the question's order, top to bottom) with each count and share as text."""
    total = sum(counts)
    wrapped = ["<br>".join(textwrap.wrap(label, 34)[:3]) for label in labels]
    texts = [f"{n}  ({n / total:.0%})" if total else "0" for n in counts]
    if matched is not None:
        texts[matched] += f"   {MEASURED_MARK}"
    colors = [DECODE_COLOR if i == matched else NEUTRAL_COLOR for i in range(len(counts))]
    fig = go.Figure(go.Bar(
        y=wrapped, x=counts, orientation="h", text=texts, textposition="outside", cliponaxis=False,
        marker=dict(color=colors, pattern=dict(shape=["/" if i == matched else "" for i in range(len(counts))])),
        hovertemplate="%{y}: %{x} answers<extra></extra>"))
    subtitle = f"{total} answer{'s' if total != 1 else ''}" + (f" · measured: {measured_text}" if measured_text else "")
    layout = base_layout(title, "answers", "", height=110 + 70 * len(labels))
    layout["title"]["text"] = f"{title}<br><sup>{subtitle}</sup>"
    fig.update_layout(**layout)
    fig.update_layout(margin=dict(l=20, r=160, t=90, b=60), showlegend=False)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(rangemode="tozero", dtick=max(1, -(-max(counts + [1]) // 8)), range=[0, max(counts + [1]) * 1.15])
    return fig


def poll_text(labels: list[str], counts: list[int], matched: int | None = None) -> str:
    """The histogram as a Markdown list a screen reader reads: each option, its count and share, the measured one
    named."""
    total = sum(counts)
    lines = [f"The room's answers, {total} in all:"]
    for i, (label, n) in enumerate(zip(labels, counts)):
        share = f" ({n / total:.0%})" if total else ""
        mark = " — the measurement's answer" if i == matched else ""
        lines.append(f"- {label}: **{n}**{share}{mark}")
    return "\n".join(lines)
