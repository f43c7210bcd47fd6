"""The Remedies lab's words follow what was measured, with the noise band stated: slower says slower, a change
within the band says noise, and only a measured gain earns the 'closer to memory speed' explanation."""
from engine.labs.remedies import KernelsResult, PhaseRow, PrefixResult
from ui.text import remedy_text as rt


def kernels(ttft_plain, tpot_plain, ttft_fast, tpot_fast) -> KernelsResult:
    return KernelsResult([PhaseRow("plain (nn.Linear)", ttft_plain, tpot_plain, 24, 24, 500_000_000),
                          PhaseRow("fast kernels", ttft_fast, tpot_fast, 24, 24, 500_000_000)], "oneDNN", True)


def test_effect_band():
    assert [rt.effect(x) for x in (1.5, 1.15, 1.0, 0.88, 0.87, 0.83, float("nan"))] == \
        ["faster", "noise", "noise", "noise", "noise", "slower", "n/a"]
    assert rt.effect_words(0.83) == "×0.83 (slower)" and rt.effect_words(1.08) == "×1.08 (within noise)"
    assert "±15%" in rt.NOISE_NOTE


def test_kernels_measured_slower_says_so():
    """The issue's run: fast kernels TTFT ×0.83, TPOT ×0.88 against plain."""
    text = rt.kernels_summary(kernels(0.083, 0.066, 0.100, 0.075))
    assert "Decode TPOT ×0.88 (within noise), prefill TTFT ×0.83 (slower)" in text
    assert "Measured slower for prefill" in text
    assert "closer to the memory's own speed" not in text


def test_kernels_measured_faster_explains_why():
    text = rt.kernels_summary(kernels(0.100, 0.080, 0.095, 0.050))
    assert "Decode TPOT ×1.60 (faster)" in text and "closer to the memory's own speed" in text


def test_prefix_tpot_within_noise_is_called_noise():
    r = PrefixResult(PhaseRow("from scratch", 0.2, 0.054, 40, 8), PhaseRow("prefix reused", 0.05, 0.05, 40, 8),
                     40, 30, 10, 1e-6)
    text = rt.prefix_summary(r)
    assert "TTFT 200.0 ms → 50.0 ms (×4.00 (faster))" in text and "(×1.08 (within noise);" in text


def test_tab_labels_are_short():
    assert sum(len(v) for v in rt.TAB_LABELS.values()) <= 80 and rt.TAB_LABELS["matrix"] == "Indicator lights"
