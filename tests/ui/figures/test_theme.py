"""The dark theme keeps every chart readable: dark background, light text, each data colour at WCAG contrast >= 3
against the background, and the two phases still two different colours."""
import colorsys
import json

import pytest

from tests.ui.figures import lab_samples
from tests.ui.figures.test_fit import long_prompt_trace, split
from ui.figures import fig_attention, fig_kvcache, fig_timing, theme


def rgb(colour: str) -> tuple[float, float, float]:
    c = colour.strip()
    if c.startswith("#"):
        return tuple(int(c[i:i + 2], 16) / 255 for i in (1, 3, 5))
    if c.startswith("rgb"):
        parts = c[c.index("(") + 1:c.index(")")].split(",")
        return tuple(float(p) / 255 for p in parts[:3])
    return {"white": (1.0, 1.0, 1.0), "black": (0.0, 0.0, 0.0)}[c.lower()]


def luminance(colour: str) -> float:
    lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in rgb(colour)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def data_colours(fig) -> set[str]:
    """The colours lines, markers and bars are drawn in (not text inside bars, not transparent fills)."""
    found = set()
    for trace in fig.to_plotly_json()["data"]:
        for part in ("marker", "line"):
            colour = (trace.get(part) or {}).get("color")
            for c in colour if isinstance(colour, list) else [colour]:
                if isinstance(c, str) and not c.startswith("rgba"):
                    found.add(c)
    return found


def figures() -> dict:
    trace = long_prompt_trace(T=40, n=6)
    steps = [0.06, 0.061, 0.2, 0.06]
    figs = dict(lab_samples.sample_figures())
    figs.update({
        "phase_split": fig_timing.phase_split_figure(split(0.3, 2.0)),
        "itl": fig_timing.itl_figure(0.3, steps, stall_s=[0, 0, 0.1, 0], riders=[1, 2, 2, 1]),
        "attention_row": fig_attention.attention_row_figure(trace, 6, 0, None),
        "gqa": fig_kvcache.gqa_figure(9, 3),
    })
    return figs


@pytest.mark.parametrize("name", list(figures()))
def test_every_data_colour_stands_out_on_the_dark_background(name):
    dark = theme.styled(figures()[name], theme.DARK)
    assert dark.layout.paper_bgcolor == theme.DARK_BACKGROUND and dark.layout.font.color == theme.DARK_INK
    assert contrast(theme.DARK_INK, theme.DARK_BACKGROUND) >= 7  # text: WCAG AAA
    for colour in data_colours(dark):
        assert contrast(colour, dark.layout.plot_bgcolor or theme.DARK_BACKGROUND) >= 3, (name, colour)


def test_every_figure_is_drawn_on_the_white_template_which_no_layout_names():
    """The white template is the process's default (cheap: Plotly does not check its default again), not a key of
    each figure's layout (a deep copy and a check of the whole template, per figure)."""
    import plotly.io as pio

    white = pio.templates["plotly_white"].layout.plot_bgcolor
    assert white != pio.templates["plotly"].layout.plot_bgcolor and "template" not in theme.base_layout()
    for name, fig in figures().items():
        assert fig.layout.template.layout.plot_bgcolor == white, name


def test_the_light_colours_would_not_all_pass_on_dark():
    """The swap matters: the light theme's deep blue (the bridge) would sink into the dark background."""
    assert contrast(theme.DECODE_COLOR, theme.DARK_BACKGROUND) < 4
    assert contrast(theme.DARK_COLORS[theme.DECODE_COLOR], theme.DARK_BACKGROUND) >= 4.5


def test_the_two_phases_keep_their_hues_and_stay_apart():
    hue = lambda c: colorsys.rgb_to_hsv(*rgb(c))[0] * 360  # noqa: E731
    for light in (theme.PREFILL_COLOR, theme.DECODE_COLOR):
        assert abs(hue(light) - hue(theme.DARK_COLORS[light])) < 12  # orange stays orange, blue stays blue
    prefill, decode = theme.DARK_COLORS[theme.PREFILL_COLOR], theme.DARK_COLORS[theme.DECODE_COLOR]
    assert abs(hue(prefill) - hue(decode)) > 120  # far apart on the colour wheel (also for red-green colour blindness)


def test_dark_restyles_colour_scales_shapes_and_annotations():
    trace = long_prompt_trace(T=40, n=6)
    heat = theme.styled(fig_attention.attention_heatmap(trace, 0, None, "linear"), theme.DARK)
    scale = [c for _, c in heat.data[0].colorscale]
    assert scale[0] == theme.DARK_BACKGROUND and theme.DECODE_COLOR not in scale  # "no attention" = background
    assert heat.layout.plot_bgcolor != "#F4F4F4"  # masked cells: a dark grey, still apart from zero weight
    row = theme.styled(fig_attention.attention_row_figure(long_prompt_trace(), 7, 0, None), theme.DARK)
    texts = [a.font.color for a in row.layout.annotations if a.font.color]
    assert texts and all(contrast(c, theme.DARK_BACKGROUND) >= 4.5 for c in texts)


def test_light_is_the_figure_as_built_and_dark_leaves_it_alone():
    fig = fig_timing.itl_figure(0.3, [0.06, 0.07], riders=[1, 2])
    before = fig.to_plotly_json()
    assert theme.styled(fig, theme.LIGHT) is fig
    theme.styled(fig, theme.DARK)
    assert fig.to_plotly_json() == before  # a copy: the cached figure of another (light) session is untouched


def test_dark_keeps_animation_frames():
    anim = fig_attention.phase_animation(long_prompt_trace(T=30, n=4), 0, None)
    dark = theme.styled(anim, theme.DARK)
    assert [f.name for f in dark.frames] == [f.name for f in anim.frames]
    assert dark.data[0].colorscale[0][1] == theme.DARK_BACKGROUND and dark.layout.updatemenus  # play button kept


def _checked(fig) -> dict:
    """`fig` as Plotly gives it once every property is checked again (a ValueError where one is not valid)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    return json.loads(pio.to_json(go.Figure(fig.to_plotly_json()), validate=False))


@pytest.mark.parametrize("name", [*figures(), "animation"])
def test_dark_and_enlarged_figures_are_what_a_checked_rebuild_gives(name):
    """`styled` and `enlarged` rebuild a checked figure without Plotly's checks (they swap colours, scale font sizes):
    each result is the figure a checked rebuild of it gives, dark, enlarged, or both."""
    import plotly.io as pio

    fig = fig_attention.phase_animation(long_prompt_trace(T=30, n=4), 0, None) if name == "animation" else figures()[name]
    dark = theme.styled(fig, theme.DARK)
    for made in (dark, theme.enlarged(fig, 1.4), theme.enlarged(dark, 1.4)):
        assert json.loads(pio.to_json(made, validate=False)) == _checked(made)


def test_a_colour_plotly_would_refuse_is_still_caught(monkeypatch):
    """What the unchecked rebuild lets through, the check above refuses: a dark colour that is no colour."""
    monkeypatch.setitem(theme.DARK_COLORS, theme.DECODE_COLOR, "bridge-blue")
    with pytest.raises(ValueError, match="color"):
        _checked(theme.styled(fig_timing.itl_figure(0.3, [0.06, 0.07]), theme.DARK))
