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
        title=dict(text=title, font=dict(size=TITLE_SIZE)),
        font=dict(size=FONT_SIZE),
        xaxis=dict(title=dict(text=x_title), automargin=True),
        yaxis=dict(title=dict(text=y_title), automargin=True),
        height=height + 60,  # room for the legend under the x-axis
        margin=dict(l=70, r=30, t=70, b=130),
        template="plotly_white",
        # under the x-axis title, so a legend never covers a long chart title
        legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0, traceorder="normal"),
    )
