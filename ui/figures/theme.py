"""One look for every chart: the two phases' colours, projector-sized fonts, shared Plotly layout, light or dark.

A dark room wants a dark screen: `styled(fig, "dark")` gives any finished figure the dark look (Plotly's dark
template on Streamlit's own dark background) and swaps each colour that would sink into it for a lighter one of the
same hue, so orange is still the valley and blue the bridge (WCAG contrast, tests/ui/figures/test_theme.py).
"""
from __future__ import annotations

import plotly.io as pio

# Every figure on Plotly's white template, set as the process's default rather than in each figure's layout: Plotly
# applies its default without checking it again, where `template="plotly_white"` deep-copied and re-validated the
# whole template in each figure (the labs' and story pages' sample figures, built and turned into JSON: 20.0 ms each
# that way, 11.0 ms this way, the same JSON). The dark look (`styled`) names its template.
pio.templates.default = "plotly_white"

# `styled` and `enlarged` rebuild a figure Plotly has already checked, from its own JSON with colours swapped for the
# ones below or font sizes scaled: they pass `_validate=False` (the Figure constructor's switch for what is known to be
# valid), where checking every property and the dark template again cost ~9 ms of the dashboard's CPU per figure, each
# rerun. A test keeps the result equal to a checked rebuild's for every sample figure (tests/ui/figures/test_theme.py).

PREFILL_COLOR = "#E07A1F"  # the valley: warm orange, everywhere prefill appears
DECODE_COLOR = "#1F6FB4"  # the bridge: deep blue, everywhere decode appears
NEUTRAL_COLOR = "#7A7A7A"  # things that belong to neither phase (warm-up, overhead, floors)
ESTIMATE_DASH = "dash"  # estimated (formula) lines are dashed; measured ones are solid
FONT_SIZE = 18  # readable on a projector at 1280x800
TITLE_SIZE = 22
PHASE_COLORS = {"prefill": PREFILL_COLOR, "decode": DECODE_COLOR}

LIGHT, DARK = "light", "dark"
DARK_BACKGROUND = "#0E1117"  # Streamlit's dark background: a chart sits on the page without a lighter frame
DARK_INK = "#E8EAED"  # text and axis labels
DARK_GRID = "#3A3F4B"  # grid lines: visible, quieter than the data
# colours the builders use that a dark background would swallow -> the same hue, lighter (or, for the white end
# of a colour scale, the background itself: "no attention" stays "nothing there")
DARK_COLORS = {
    PREFILL_COLOR: "#F5943F",
    DECODE_COLOR: "#5AA9F0",
    NEUTRAL_COLOR: "#A8A8A8",
    "#FFFFFF": DARK_BACKGROUND,  # low end of the attention colour scales
    "#F4F4F4": "#2A2F3A",  # masked (future) cells of the attention matrix
    "#222222": DARK_INK,  # the batch-size step line on the ITL chart
    "#555555": "#B8B8B8",  # query heads of the GQA picture
    "#6A4C93": "#B39DDB",  # KV heads of the GQA picture
    "#8E44AD": "#C39BD3",  # attention, in the profile charts
    "#C0392B": "#E8685A",  # LM head (profile); "slower" end of the indicator lights
    "#2E9E5B": "#4CC27A",  # MLP (profile), the remedy's bars
}


def base_layout(title: str = "", x_title: str = "", y_title: str = "", height: int = 420) -> dict:
    """Keyword arguments for `fig.update_layout(...)` shared by every figure."""
    return dict(
        # the title starts where the plot starts (not at the figure's edge), so a long y-axis title beside the
        # plot never runs through it; it hangs from the top of the figure
        title=dict(text=title, font=dict(size=TITLE_SIZE), x=0, xref="paper", xanchor="left",
                   y=1, yref="container", yanchor="top", pad=dict(t=12)),
        font=dict(size=FONT_SIZE),
        xaxis=dict(title=dict(text=x_title), automargin=True),
        yaxis=dict(title=dict(text=y_title), automargin=True),
        height=height + 60,  # room for the legend under the x-axis
        margin=dict(l=70, r=30, t=70, b=130),  # the white template: the process's default (above)
        # under the x-axis title, so a legend never covers a long chart title
        legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0, traceorder="normal"),
    )


def error_bars(values: list[float], runs: list[list[float]]) -> dict | None:
    """Plotly error bars from each point's median (`values`) to its fastest and slowest run (`runs`, in the same unit);
    None when no point kept two runs."""
    if not any(len(r) >= 2 for r in runs):
        return None
    hi = [max(max(r) - v, 0.0) if len(r) >= 2 else 0.0 for v, r in zip(values, runs)]
    lo = [max(v - min(r), 0.0) if len(r) >= 2 else 0.0 for v, r in zip(values, runs)]
    return dict(type="data", symmetric=False, array=hi, arrayminus=lo, thickness=2)


def subtitled(fig, text: str) -> None:
    """`text` under the figure's title, in a smaller font (where its numbers come from, when not measured here: a chart
    saved as a PNG leaves the page's own line behind); the top margin grows to hold it. Nothing when text is ''."""
    if text:
        fig.update_layout(title_subtitle=dict(text=text, font=dict(size=FONT_SIZE)),
                          margin_t=(fig.layout.margin.t or 70) + FONT_SIZE + 8)


def export_config(name: str) -> dict:
    """Plotly's `config` for st.plotly_chart: the modebar camera saves a 2x PNG named after the chart."""
    return dict(displaylogo=False, toImageButtonOptions=dict(format="png", filename=f"two_bends_{name}", scale=2))


def enlarged(fig, factor: float):
    """A copy of `fig` with every font size in its layout (titles, ticks, legend, annotations) times `factor`."""
    import plotly.graph_objects as go

    def scale(node, in_font: bool = False):
        if isinstance(node, dict):
            return {k: (v * factor if k == "size" and in_font and isinstance(v, (int, float)) else
                        scale(v, in_font=k.endswith("font"))) for k, v in node.items()}
        if isinstance(node, list):
            return [scale(v, in_font) for v in node]
        return node

    layout = fig.to_plotly_json()["layout"]
    template = layout.pop("template", None)  # Plotly's templates set no font size: not walked
    layout = scale(layout)
    layout.setdefault("font", {}).setdefault("size", FONT_SIZE * factor)
    if template is not None:
        layout["template"] = template
    return go.Figure(data=fig.data, layout=layout, frames=fig.frames, _validate=False)


def _recolour(node):
    if isinstance(node, dict):
        return {k: _recolour(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_recolour(v) for v in node]
    if isinstance(node, str):
        return DARK_COLORS.get(node.upper(), node)
    return node


def styled(fig, mode: str = LIGHT):
    """`fig` for a light or dark page: light returns it as built; dark returns a copy with Plotly's dark template,
    Streamlit's dark background and every colour of DARK_COLORS swapped (traces, colour scales, shapes, annotations)."""
    if mode != DARK:
        return fig
    import plotly.graph_objects as go
    import plotly.io as pio

    spec = fig.to_plotly_json()
    spec.get("layout", {}).pop("template", None)  # replaced below: not walked
    spec = _recolour(spec)
    layout = spec.get("layout", {})
    layout["template"] = pio.templates["plotly_dark"]
    layout["paper_bgcolor"] = DARK_BACKGROUND
    layout.setdefault("plot_bgcolor", DARK_BACKGROUND)
    layout.setdefault("font", {})["color"] = DARK_INK
    for name in [k for k in layout if k.startswith(("xaxis", "yaxis"))]:
        layout[name].setdefault("gridcolor", DARK_GRID)
        layout[name].setdefault("zerolinecolor", DARK_GRID)
    return go.Figure(data=spec.get("data", []), layout=layout, frames=spec.get("frames", []), _validate=False)
