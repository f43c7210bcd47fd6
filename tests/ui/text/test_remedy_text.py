"""The Remedies lab's words follow what was measured: a verdict comes from this session's runs of a remedy (each
against its own spread), never from a fixed noise band; fewer than three runs get no verdict; slower says slower, and
only a measured gain earns the 'closer to memory speed' explanation."""
import math
from pathlib import Path

import pytest

from engine.labs.remedies import KernelsResult, PhaseRow, PrefixResult
from ui.text import remedy_text as rt

JITTER = (1.0, 1.01, 0.99)  # three runs of one measurement, 2 % apart


def row(label, ttft, tpot, runs=JITTER, path="") -> PhaseRow:
    return PhaseRow(label, ttft, tpot, 24, 24, 500_000_000, [ttft * j for j in runs], [tpot * j for j in runs],
                    path=path)


def kernels(ttft_plain, tpot_plain, ttft_fast, tpot_fast, runs=JITTER) -> KernelsResult:
    return KernelsResult([row("plain (nn.Linear)", ttft_plain, tpot_plain, runs),
                          row("fast kernels", ttft_fast, tpot_fast, runs[::-1])], "oneDNN", True)


def test_too_few_runs_get_no_verdict():
    e = rt.Effect((1.5,))
    assert e.verdict == "few" and "1 run: a verdict needs 3" in e.words() and e.marker() == "○ too few runs ×1.50"
    assert math.isnan(e.spread) and rt.Effect((1.5, 1.6)).verdict == "few"
    assert rt.Effect(()).verdict == "n/a" and rt.Effect((float("nan"),)).marker() == "not measured"


@pytest.mark.parametrize("ratios, verdict", [
    ((1.40, 1.50, 1.45), "faster"),  # every run faster, even the weakest far beyond the spread
    ((0.80, 0.85, 0.82), "slower"),
    ((0.95, 1.10, 1.20), "noise"),  # the runs disagree on the direction
    ((1.02, 1.60, 1.30), "noise"),  # all faster, but 57 % apart: more than the weakest gain (×1.02)
    ((1.02, 1.03, 1.025), "faster"),  # a small gain, measured tightly: the band is the runs' own, not a constant
])
def test_the_verdict_comes_from_the_measurements_spread(ratios, verdict):
    assert rt.Effect(ratios).verdict == verdict


def test_no_constant_noise_band_is_left():
    assert not hasattr(rt, "NOISE") and "±15" not in rt.NOISE_NOTE and "spread" in rt.NOISE_NOTE


def test_words_state_the_median_the_count_and_the_spread():
    words = rt.Effect((1.40, 1.50, 1.45)).words()
    assert words.startswith("×1.45 (faster; median of 3, 7% apart)")


def test_kernels_measured_slower_in_every_run_says_so():
    text = rt.kernels_summary(kernels(0.083, 0.066, 0.100, 0.075))  # TTFT ×0.83, TPOT ×0.88, runs 2 % apart
    assert "prefill TTFT ×0.83 (slower" in text and "Measured slower for decode and prefill" in text
    assert "closer to the memory's own speed" not in text


def test_kernels_measured_in_too_few_runs_hold_the_verdict_back():
    text = rt.kernels_summary(kernels(0.083, 0.066, 0.100, 0.075, runs=(1.0,)))
    assert "1 run: a verdict needs 3" in text and "Fewer than 3 runs give no verdict" in text and "slower for" not in text


def test_kernels_measured_faster_explains_why():
    text = rt.kernels_summary(kernels(0.100, 0.080, 0.095, 0.050))
    assert "Decode TPOT ×1.60 (faster" in text and "closer to the memory's own speed" in text


def test_runs_on_different_paths_are_named():
    rows = [row("float32", 0.1, 0.02, path="fused C step (batch 1 only)"),
            row("bfloat16", 0.2, 0.03, path="flat batched loop (any batch)")]
    text = rt.phase_rows_summary(rows)
    assert "float32 ran the fused C step (batch 1 only); bfloat16 ran the flat batched loop" in text


def test_prefix_tpot_that_moves_both_ways_is_too_close_to_tell():
    full = PhaseRow("from scratch", 0.2, 0.052, 40, 8, 0, [0.2, 0.2, 0.2], [0.054, 0.050, 0.052])
    reused = PhaseRow("prefix reused", 0.05, 0.052, 40, 8, 0, [0.05, 0.05, 0.05], [0.050, 0.053, 0.052])
    text = rt.prefix_summary(PrefixResult(full, reused, 40, 30, 10, 1e-6))
    assert "TTFT 200.0 ms → 50.0 ms (×4.00 (faster" in text and "too close to tell" in text


def test_history_keeps_the_latest_few():
    history: dict = {}
    for i in range(rt.HISTORY_KEEP + 2):
        rt.keep(history, "kernels", i)
    assert history["kernels"] == list(range(2, rt.HISTORY_KEEP + 2))


def test_int8_is_said_against_float32_and_bf16_and_weight_only():
    helps = rt.HELPS["int8"][1]
    assert "4x fewer bytes per weight than float32" in helps and "2x fewer than bf16" in helps
    assert "Weight-only" in helps and "W8A8" in helps


def test_no_cache_recomputes_rather_than_rereads():
    from types import SimpleNamespace as N
    steps = lambda xs: [N(seconds=s, kv_length=10 + i) for i, s in enumerate(xs)]  # noqa: E731
    r = N(cached=N(steps=steps([0.02, 0.02])), uncached=N(steps=steps([0.05, 0.09])), same_tokens=True)
    text = rt.kv_cache_summary(r)
    assert "recomputes the keys and values" in text and "re-reads" not in text
    assert "cost more than the first" in text


def test_a_cacheless_run_whose_last_step_was_not_dearer_is_not_said_to_grow():
    """One run of the no-cache path on a busy machine: a stall on the first step can leave the last no dearer. The words
    follow the measured steps, never the expectation."""
    from types import SimpleNamespace as N
    steps = lambda xs: [N(seconds=s, kv_length=10 + i) for i, s in enumerate(xs)]  # noqa: E731
    r = N(cached=N(steps=steps([0.02, 0.02])), uncached=N(steps=steps([0.30, 0.09])), same_tokens=True)
    text = rt.kv_cache_summary(r)
    assert "cost more than the first" not in text and "no dearer than the first" in text


def test_the_kv_cache_needs_three_measures_for_a_verdict_and_the_note_says_so():
    """Each KV-cache Measure gives one ratio (one run each way), so a verdict needs three Measures: the note says so
    and the 45-minute lesson asks for three."""
    from types import SimpleNamespace as N

    from ui.demo import lesson
    steps = lambda xs: [N(seconds=s, kv_length=10 + i) for i, s in enumerate(xs)]  # noqa: E731
    one = N(cached=N(steps=steps([0.02, 0.02])), uncached=N(steps=steps([0.5, 0.9])), same_tokens=True)
    assert rt.effects("kv_cache", [one, one])[1].verdict == "few"
    assert rt.effects("kv_cache", [one, one, one])[1].verdict == "faster"
    assert "the KV cache's Measure once, so it needs three Measures" in rt.NOISE_NOTE
    the = lesson.load(Path(__file__).resolve().parents[3] / "assets" / "lessons" / "45-minutes.json")
    step = next(s for s in the.steps if s.page == "lab_remedies")
    assert "KV cache tab three times" in step.do


def test_the_llama_cpp_claim_is_cited():
    assert "github.com/ggml-org/llama.cpp/discussions/4167" in rt.LLAMA_CPP_CITATION
    assert "not made here" in rt.LLAMA_CPP_CITATION


def test_tab_labels_are_short():
    assert sum(len(v) for v in rt.TAB_LABELS.values()) <= 80 and rt.TAB_LABELS["matrix"] == "Indicator lights"


@pytest.mark.parametrize("tpot_int8, said", [(0.020, True), (0.009, False)])
def test_int8_gains_less_than_the_byte_ratio_only_where_it_did(tpot_int8, said):
    """The 'less than the byte ratio' explanation is arithmetic on the measurement: 400 MB -> 100 MB is ÷4, a step 40 ->
    20 ms gained ×2 (said), 40 -> 9 ms ×4.4 (more than the bytes: not said)."""
    from engine.labs.remedies import Int8Result
    from engine.techniques.quantize import Agreement
    f = PhaseRow("float32", 0.1, 0.040, 24, 24, 400_000_000, [0.1 * j for j in JITTER], [0.040 * j for j in JITTER])
    q = PhaseRow("int8", 0.1, tpot_int8, 24, 24, 100_000_000, [0.1 * j for j in JITTER],
                 [tpot_int8 * j for j in JITTER])
    text = rt.int8_summary(Int8Result([f, q], "int8 kernel", Agreement(8, 1.0, 0.01, 0.001), 0.5))
    assert ("Decode gains less than the byte ratio (×4.0)" in text) is said
