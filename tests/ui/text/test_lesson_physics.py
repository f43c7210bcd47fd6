"""ui/text/lesson_physics.py: the figures the lesson's sentences quote, computed from shapes, dtypes and spec sheets."""
import pytest

from engine.perfmodel.roofline import HARDWARE_PRESETS, MODEL_PRESETS
from ui.text import lesson_physics as lp


def test_gemv_intensity_per_dtype():
    assert [lp.gemv_intensity(b) for b in (4, 2, 1)] == [0.5, 1.0, 2.0]


def test_prefill_crosses_the_ridge_at_ridge_times_bytes_over_two():
    h100 = lp.card("H100")
    assert h100 is not None and h100.ridge == pytest.approx(989 / 3.35, rel=1e-3)
    assert lp.prefill_crossover_tokens(h100.ridge, 2) == round(h100.ridge)  # bf16: about T FLOP per byte
    assert lp.prefill_crossover_tokens(3.0, 4) == 6  # a CPU's ridge in float32: a few tokens
    assert "roughly 300 tokens" in lp.gpu_prefill_crossover_words()


def test_the_kv_cache_at_8k_comes_from_the_config():
    cfg = MODEL_PRESETS["SmolLM2-135M"]
    cw = lp.cache_and_weights(cfg, 4, 8192)
    assert cw.kv_bytes == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * 8192  # 30·3·64: 377.5 MB
    assert cw.kv_bytes / 1e6 == pytest.approx(377.5, abs=0.1) and cw.weight_bytes / 1e6 == pytest.approx(538.1, abs=0.1)
    assert "377 MB of KV cache against 538 MB of weights" in lp.cache_sentence(cfg, 4, "float32", 8192)
    assert lp.cache_and_weights(cfg, 4, 0).growth == 1.0


def test_the_ridge_range_is_the_presets_not_a_typed_range():
    gpus = sorted(h.ridge for h in HARDWARE_PRESETS.values() if "CPU" not in h.name)
    words = lp.ridge_range_words()
    assert f"{gpus[0]:,.0f} FLOP/byte" in words and f"{gpus[-1]:,.0f}" in words
    assert all("CPU" not in c.name for c in lp.cards())
