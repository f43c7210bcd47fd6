"""The step-time fit recovers known coefficients; spec-sheet step models scale with FLOP/s and bandwidth."""
import math
import random

import pytest

from engine.errors import EngineError
from engine.perfmodel import card_model as cm
from engine.perfmodel.cards import card
from engine.perfmodel.model_shapes import model_shape
from engine.perfmodel.step_model import CardStepModel, Step, StepModel, fit_steps, from_dict, to_dict

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


def test_card_step_model_is_the_card_models_step():
    s = cm.Setup(model_shape("llama-2-7b").config, card("h100-sxm"), "float16", 1, "Llama-2 7B")
    m = CardStepModel(s)
    assert m.source.startswith("estimate: the card model") and "spec sheet" in m.source
    assert m.seconds(2048, 2048) == pytest.approx(cm.prefill(s, 2048).seconds)
    assert m.seconds(16, 16 * 2112) == pytest.approx(cm.decode_step(s, 2112, 16).seconds)
    assert m.kv_bytes_per_token == s.kv_bytes_per_token and m.fixed_s > 0
    assert m.split(10, 1000, 4, 100) == pytest.approx(m.seconds(10, 1000) * 0.4)
    slow = CardStepModel(cm.Setup(s.model, card("a100-80gb"), "float16"))
    assert slow.seconds(2048, 2048) > 2 * m.seconds(2048, 2048)  # the valley: FLOP/s
    assert 1.3 < slow.seconds(1, 2048) / m.seconds(1, 2048) < 1.8  # the bridge: bandwidth


def test_round_trip():
    assert from_dict(to_dict(TRUE)) == TRUE


def test_one_token_steps_on_a_path_of_their_own_get_their_own_cost():
    """A CPU's C decode step serves a sequence decoding alone at about half a batch's step: with enough such steps,
    their cost is fitted apart and the line through the others is left as it was."""
    lone = 0.002  # s: the one-token path's own cost, below the line's 4.2 ms at one token
    steps = [s for s in _synthetic() if s.tokens != 1]
    for kv in (16, 64, 128, 256, 512, 1024):
        steps.append(Step(1, kv * TRUE.kv_bytes_per_token, lone + TRUE.per_kv_byte_s * kv * TRUE.kv_bytes_per_token))
    fit = fit_steps(steps, TRUE.kv_bytes_per_token)
    assert fit.model.lone_s == pytest.approx(lone, rel=1e-6)
    assert fit.model.fixed_s == pytest.approx(TRUE.fixed_s, rel=1e-6)
    assert fit.model.per_token_s == pytest.approx(TRUE.per_token_s, rel=1e-6)
    assert max(abs(r) for r in fit.residuals) < 1e-12
    assert "fitted from 18 steps, the 6 one-token steps on their own" in fit.model.source
    assert fit.model.seconds(1, 100) == pytest.approx(lone + TRUE.per_kv_byte_s * 100 * TRUE.kv_bytes_per_token)
    assert fit.model.seconds(2, 100) == pytest.approx(TRUE.seconds(2, 100))
    assert fit.model.split(1, 100, 0, 0) == 0.0 and fit.model.split(1, 100, 1, 100) == fit.model.seconds(1, 100)
    assert from_dict(to_dict(fit.model)) == fit.model
    few = fit_steps(steps[:-2], TRUE.kv_bytes_per_token).model  # 4 one-token steps: too few, they stay on the line
    assert few.lone_s is None and "on their own" not in few.source


def test_a_bad_one_token_cost_is_one_line():
    with pytest.raises(EngineError, match="lone_s"):
        StepModel(0.01, 1e-3, 0.0, 1.0, lone_s=math.inf).check()
    StepModel(0.01, 1e-3, 0.0, 1.0, lone_s=None).check()
