"""The indicator lights are coloured by what was measured: grey within the noise band, red only when measured
slower beyond it, green only when measured faster beyond it."""
import math

from engine.labs.remedies import KernelsResult, PhaseRow, PrefixResult
from ui.figures import fig_remedies as fr


def results():
    prefix = PrefixResult(PhaseRow("from scratch", 0.2, 0.054, 40, 8), PhaseRow("prefix reused", 0.05, 0.05, 40, 8),
                          40, 30, 10, 1e-6)  # TTFT x4.00, TPOT x1.08
    kern = KernelsResult([PhaseRow("plain (nn.Linear)", 0.083, 0.066, 24, 24),
                          PhaseRow("fast kernels", 0.100, 0.075, 24, 24)], "oneDNN", True)  # TTFT x0.83, TPOT x0.88
    return {"prefix": prefix, "kernels": kern}


def test_colours_follow_the_measured_effect_and_the_noise_band():
    fig = fr.indicator_matrix_figure(results())
    (prefix_ttft, prefix_tpot), (kern_ttft, kern_tpot) = fig.data[0].z
    assert prefix_ttft > 0.25 and prefix_tpot == 0.0  # x1.08: grey, as the text promises
    assert kern_ttft < 0 and kern_tpot == 0.0  # x0.83 slower: red; x0.88 within the band: grey
    assert list(fig.data[0].text[1]) == ["▼ hurts ×0.83", "● noise ×0.88"]
    assert "● noise (within ±15%)" in fig.layout.title.text


def test_each_light_says_its_verdict_in_shape_and_word_not_only_colour():
    """Readable without telling red from green: a symbol and a word in every cell, one per verdict."""
    fig = fr.indicator_matrix_figure(results())
    cells = [cell for row in fig.data[0].text for cell in row]
    assert cells == ["▲ helps ×4.00", "● noise ×1.08", "▼ hurts ×0.83", "● noise ×0.88"]
    for z, cell in zip([v for row in fig.data[0].z for v in row], cells):
        assert cell.startswith({1: "▲ helps", -1: "▼ hurts", 0: "● noise"}[(z > 0) - (z < 0)])
    assert all(mark in fig.layout.title.text for mark in ("▲ helps", "▼ hurts", "● noise"))  # the key
    assert fr.effect_marker(float("nan")) == "not measured"


def test_a_small_measured_gain_is_never_grey():
    assert fr._cell_color(1.2) >= 0.25 and fr._cell_color(1 / 1.2) <= -0.25
    assert fr._cell_color(math.nan) == 0.0


def test_effects_table_names_each_verdict():
    table = fr.effects_table(results())
    assert list(table["TTFT effect"]) == ["faster", "slower"] and list(table["TPOT effect"]) == ["noise", "noise"]
