"""One look for every chart: the two phases' colours, projector-sized fonts, shared Plotly layout."""
from __future__ import annotations

PREFILL_COLOR = "#E07A1F"  # the valley: warm orange, everywhere prefill appears
DECODE_COLOR = "#1F6FB4"  # the bridge: deep blue, everywhere decode appears
NEUTRAL_COLOR = "#7A7A7A"  # things that belong to neither phase (warm-up, overhead, floors)
ESTIMATE_DASH = "dash"  # estimated (formula) lines are dashed; measured ones are solid
FONT_SIZE = 18  # readable on a projector at 1280x800
TITLE_SIZE = 22
PHASE_COLORS = {"prefill": PREFILL_COLOR, "decode": DECODE_COLOR}


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
        margin=dict(l=70, r=30, t=70, b=130),
        template="plotly_white",
        # under the x-axis title, so a legend never covers a long chart title
        legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0, traceorder="normal"),
    )


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
    layout = scale(layout)
    layout.setdefault("font", {}).setdefault("size", FONT_SIZE * factor)
    return go.Figure(data=fig.data, layout=layout, frames=fig.frames)
