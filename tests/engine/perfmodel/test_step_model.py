"""The step-time fit recovers known coefficients; spec-sheet step models scale with FLOP/s and bandwidth."""
import math
import random

import pytest

from engine.errors import EngineError
from engine.perfmodel.roofline import HARDWARE_PRESETS, MODEL_PRESETS
from engine.perfmodel.step_model import Step, StepModel, efficiency, fit_steps, for_hardware, from_dict, to_dict

TRUE = StepModel(0.004, 2e-4, 3e-10, 46080.0)


def _synthetic(noise: float = 0.0, seed: int = 0) -> list[Step]:
    rng = random.Random(seed)
    steps = []
    for riders in (1, 2, 4, 8):
        for kv in (16, 128, 512):
            kv_tokens = riders * kv
            s = TRUE.seconds(riders, kv_tokens) * (1 + rng.gauss(0, noise))
            steps.append(Step(riders, kv_tokens * TRUE.kv_bytes_per_token, s))
    for t in (8, 64, 256):
        steps.append(Step(t, t * TRUE.kv_bytes_per_token, TRUE.seconds(t, t) * (1 + rng.gauss(0, noise)), "prefill"))
    return steps


def test_fit_recovers_known_coefficients():
    fit = fit_steps(_synthetic(), TRUE.kv_bytes_per_token)
    assert fit.model.fixed_s == pytest.approx(TRUE.fixed_s, rel=1e-6)
    assert fit.model.per_token_s == pytest.approx(TRUE.per_token_s, rel=1e-6)
    assert fit.model.per_kv_byte_s == pytest.approx(TRUE.per_kv_byte_s, rel=1e-6)
    assert max(abs(r) for r in fit.residuals) < 1e-12
    assert "fitted from 15 steps" in fit.model.source


def test_fit_with_noise_stays_close():
    fit = fit_steps(_synthetic(noise=0.02, seed=3), TRUE.kv_bytes_per_token)
    assert fit.model.per_token_s == pytest.approx(TRUE.per_token_s, rel=0.1)
    assert fit.relative_error < 0.05


def test_a_negative_coefficient_is_dropped_not_kept():
    steps = [Step(n, 1000.0 * n, 0.01 + 0.001 * n - 1e-12 * 1000 * n) for n in (1, 2, 4, 8, 16)]
    model = fit_steps(steps, 1.0).model
    assert model.per_kv_byte_s >= 0 and model.fixed_s > 0


def test_too_few_steps_is_one_line():
    with pytest.raises(EngineError, match="at least 3"):
        fit_steps([Step(1, 1.0, 0.01)], 1.0)


def test_bad_model_is_one_line():
    with pytest.raises(EngineError, match="fixed_s"):
        StepModel(math.nan, 1e-3, 0.0, 1.0).check()


def test_spec_sheet_model_scales_with_the_card():
    cfg = MODEL_PRESETS["Llama-2 7B (MHA, 32 KV heads)"]
    eff = efficiency(TRUE, MODEL_PRESETS["SmolLM2-135M"], peak_flops=1e12, peak_bytes_per_s=20e9)
    h100, a100 = HARDWARE_PRESETS["NVIDIA H100 SXM"], HARDWARE_PRESETS["NVIDIA A100 80GB SXM"]
    fast, slow = for_hardware(eff, cfg, h100), for_hardware(eff, cfg, a100)
    assert slow.per_token_s / fast.per_token_s == pytest.approx(h100.flops_per_s / a100.flops_per_s)
    assert slow.fixed_s / fast.fixed_s == pytest.approx(h100.bytes_per_s / a100.bytes_per_s)
    assert fast.source.startswith("estimate")
    assert 0 < eff.compute <= 1 and 0 < eff.bandwidth <= 1


def test_round_trip():
    assert from_dict(to_dict(TRUE)) == TRUE
