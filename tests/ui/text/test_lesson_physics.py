"""ui/text/lesson_physics.py: the figures the lesson's sentences quote, computed from shapes, dtypes and spec sheets."""
import pytest

from engine.perfmodel.roofline import HARDWARE_PRESETS, MODEL_PRESETS
from ui.text import lesson_physics as lp


def test_gemv_intensity_per_dtype():
    assert [lp.gemv_intensity(b) for b in (4, 2, 1)] == [0.5, 1.0, 2.0]


def test_prefill_crosses_the_ridge_at_ridge_times_bytes_over_two():
    h100 = lp.card("H100")
    assert h100 is not None and h100.ridge == pytest.approx(989 / 3.35, rel=1e-3)
    assert lp.crossover_rows(h100.ridge, 2) == round(h100.ridge)  # bf16: about T FLOP per byte
    assert lp.crossover_rows(3.0, 4) == 6  # a CPU's ridge in float32: a few tokens
    assert "roughly 300 tokens" in lp.gpu_prefill_crossover_words()


def test_the_kv_cache_at_8k_comes_from_the_config():
    cfg = MODEL_PRESETS["SmolLM2-135M"]
    cw = lp.cache_and_weights(cfg, 4, 8192)
    assert cw.kv_bytes == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * 8192  # 30·3·64: 377.5 MB
    assert cw.kv_bytes / 1e6 == pytest.approx(377.5, abs=0.1) and cw.weight_bytes / 1e6 == pytest.approx(538.1, abs=0.1)
    assert "377 MB of KV cache against 538 MB of weights" in lp.cache_sentence(cfg, 4, "float32", 8192)


def test_the_ridge_range_is_the_presets_not_a_typed_range():
    gpus = sorted(h.ridge for h in HARDWARE_PRESETS.values() if "CPU" not in h.name)
    words = lp.ridge_range_words()
    assert f"{gpus[0]:,.0f} FLOP/byte" in words and f"{gpus[-1]:,.0f}" in words
    assert all("CPU" not in c.name for c in lp.cards())


def test_a_decode_step_crosses_the_ridge_at_a_batch_of_ridge_times_bytes_over_two():
    """2 FLOPs per weight per row: the crossover batch is about the ridge in 16-bit and twice it in float32, what the
    Roofline lab's introduction and docs/performance-model.md say (intensity 2·B ÷ bytes per weight, not B ÷ bytes)."""
    from ui.text import roofline_numbers as rn
    for card in lp.cards():
        b16, b32 = lp.crossover_rows(card.ridge, 2), lp.crossover_rows(card.ridge, 4)
        assert b16 * lp.gemv_intensity(2) == pytest.approx(card.ridge, abs=1) and b32 == pytest.approx(2 * b16, abs=1)
    assert "2·B ÷ bytes per weight" in rn.INTRO and "2·T·B" in rn.INTRO and "twice that" in rn.INTRO


def test_the_lesson_physics_table_gives_this_vms_crossover_from_its_measured_ridges():
    """docs/lesson-physics.md §1: the ridge measured here (2.7–3.5 FLOP/byte, float32) puts prefill's crossover at
    2·ridge tokens; the table's range is that computation, not a typed guess."""
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[3] / "docs" / "lesson-physics.md").read_text(encoding="utf-8")
    lo, hi = lp.crossover_rows(2.7, 4), lp.crossover_rows(3.5, 4)
    assert "| 2.7–3.5, measured here" in doc and f"| {lo}–{hi} tokens |" in doc


def test_decode_attention_is_below_the_ridge_too():
    """docs/lesson-physics.md §2 says a decode step's attention does about 1.5 FLOP per byte of cache for SmolLM2 in
    float32 (4·D FLOPs per query head per cached token, 2·D numbers per KV head): computed from the shapes."""
    cfg = MODEL_PRESETS["SmolLM2-135M"]
    flops = cfg.n_heads * 4 * cfg.head_dim  # per cached token and layer
    nbytes = 2 * cfg.n_kv_heads * cfg.head_dim * 4
    assert flops / nbytes == pytest.approx(1.5) and flops / nbytes < 2.7  # under this VM's lowest measured ridge
