"""The indicator lights are coloured by the verdict over this session's runs: grey without one (too few runs, or the
runs disagree), red only when every run was slower by more than their spread, green only when faster."""
from engine.labs.remedies import KernelsResult, PhaseRow, PrefixResult
from ui.figures import fig_remedies as fr
from ui.text import crossed_numbers
from ui.text.remedy_text import Effect


def prefix(tpot_full: float, tpot_reused: float) -> PrefixResult:
    return PrefixResult(PhaseRow("from scratch", 0.2, tpot_full, 40, 8), PhaseRow("prefix reused", 0.05, tpot_reused, 40, 8),
                        40, 30, 10, 1e-6)


def kern(ttft_fast: float, tpot_fast: float) -> KernelsResult:
    return KernelsResult([PhaseRow("plain (nn.Linear)", 0.083, 0.066, 24, 24),
                          PhaseRow("fast kernels", ttft_fast, tpot_fast, 24, 24)], "oneDNN", True)


def history():
    """Three measurements of each (one run apiece, kept from before rows held their runs)."""
    return {"prefix": [prefix(0.054, 0.05), prefix(0.050, 0.053), prefix(0.052, 0.05)],  # TTFT x4.00; TPOT both ways
            "kernels": [kern(0.100, 0.075), kern(0.101, 0.064), kern(0.100, 0.070)]}  # TTFT x0.83; TPOT both ways


def test_colours_follow_the_verdict_over_the_measurements():
    fig = fr.indicator_matrix_figure(history())
    (prefix_ttft, prefix_tpot), (kern_ttft, kern_tpot) = fig.data[0].z
    assert prefix_ttft > 0.25 and prefix_tpot == 0.0  # TPOT moved both ways: grey, no verdict
    assert kern_ttft < 0 and kern_tpot == 0.0
    assert list(fig.data[0].text[1])[0].startswith("▼ hurts ×0.8")
    assert "±15" not in fig.layout.title.text  # no fixed band


def test_each_light_says_its_verdict_in_shape_and_word_not_only_colour():
    fig = fr.indicator_matrix_figure(history())
    cells = [cell for row in fig.data[0].text for cell in row]
    assert [c.split(" ×")[0] for c in cells] == ["▲ helps", "● too close to tell", "▼ hurts", "● too close to tell"]
    for z, cell in zip([v for row in fig.data[0].z for v in row], cells):
        assert cell.startswith({1: "▲ helps", -1: "▼ hurts", 0: ("●", "○")}[(z > 0) - (z < 0)])
    assert all(mark in fig.layout.title.text for mark in ("▲ helps", "▼ hurts", "● too close to tell", "○"))


def test_a_single_run_is_grey_and_says_too_few():
    fig = fr.indicator_matrix_figure({"kernels": kern(0.100, 0.075)})
    assert list(fig.data[0].z[0]) == [0.0, 0.0]
    assert all(cell.startswith("○ too few runs") for cell in fig.data[0].text[0])


def test_a_small_measured_gain_is_never_grey():
    assert crossed_numbers.light(Effect((1.2, 1.21, 1.2))) >= 0.25
    assert crossed_numbers.light(Effect((1 / 1.2, 1 / 1.21, 1 / 1.2))) <= -0.25
    assert crossed_numbers.light(Effect(())) == 0.0


def test_effects_table_names_each_verdict_and_spread():
    table = fr.effects_table(history())
    assert list(table["TTFT effect"]) == ["faster", "slower"] and list(table["TPOT effect"]) == ["noise", "noise"]
    assert list(table["runs"]) == [3, 3] and (table["TPOT runs apart"] > 0).all()
