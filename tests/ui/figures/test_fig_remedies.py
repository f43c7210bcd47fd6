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
    assert list(fig.data[0].text[1]) == ["×0.83 (slower)", "×0.88 (within noise)"]
    assert "grey within ±15% (noise)" in fig.layout.title.text


def test_a_small_measured_gain_is_never_grey():
    assert fr._cell_color(1.2) >= 0.25 and fr._cell_color(1 / 1.2) <= -0.25
    assert fr._cell_color(math.nan) == 0.0


def test_effects_table_names_each_verdict():
    table = fr.effects_table(results())
    assert list(table["TTFT effect"]) == ["faster", "slower"] and list(table["TPOT effect"]) == ["noise", "noise"]
