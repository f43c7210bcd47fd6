"""The card model's arithmetic against hand-computed values, and the physics it must keep on any card."""
import dataclasses

import pytest

from engine.errors import EngineError
from engine.perfmodel import card_model as cm
from engine.perfmodel import cards as cd
from engine.perfmodel.flops import decode_step_flops, prefill_flops
from engine.perfmodel.model_shapes import MODELS, model_shape


def setup(model="llama-2-7b", card="a100-80gb", dtype="float16", gpus=1) -> cm.Setup:
    shape = model_shape(model)
    return cm.Setup(shape.config, cd.card(card), dtype, gpus, shape.name)


@pytest.fixture
def ideal_roofline(monkeypatch):
    """A card whose passes are the plain roofline: max(compute, memory), no overheads."""
    monkeypatch.setattr(cd, "OVERLAP", dataclasses.replace(cd.OVERLAP, value=200.0))
    c = cd.with_class_values(cd.card("a100-80gb"), layer_s=0.0, pass_s=0.0, mfu=0.5, mbu=0.8)
    shape = model_shape("llama-2-7b")
    return cm.Setup(shape.config, c, "float16", 1, shape.name)


def test_decode_step_is_its_bytes_over_bandwidth_by_hand(ideal_roofline):
    s = ideal_roofline
    cfg = s.model
    step = cm.decode_step(s, 1000, 1)
    weights = cfg.n_params * 2
    kv = 1000 * 2 * 32 * 32 * 128 * 2  # context x (K and V) x layers x KV heads x head size x 2 bytes
    assert step.bytes == pytest.approx(weights + kv)
    assert step.seconds == pytest.approx((weights + kv) / (2039e9 * 0.8), rel=1e-6)
    assert step.bound == "memory"
    assert step.flops == pytest.approx(decode_step_flops(cfg, 1000, 1))


def test_prefill_uses_the_achievable_matmul_rate_by_hand(ideal_roofline):
    p = cm.prefill(ideal_roofline, 4096, 1)
    flops = prefill_flops(ideal_roofline.model, 4096, 1).total
    assert p.bound == "compute"
    assert p.seconds == pytest.approx(flops / (271.2e12 * 0.5), rel=1e-6)  # the A100's measured matmul rate x MFU


def test_decode_cost_grows_linearly_with_context():
    s = setup()
    steps = [cm.decode_step(s, ctx).seconds for ctx in (512, 1024, 2048, 4096)]
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert all(g > 0 for g in gaps)
    per_token = gaps[0] / 512
    assert gaps[1] == pytest.approx(per_token * 1024, rel=0.05) and gaps[2] == pytest.approx(per_token * 2048, rel=0.05)


def test_prefill_turns_compute_bound_at_the_crossover_prompt():
    s = setup(card="h100-sxm")
    t = cm.crossover_prompt(s)
    assert t is not None and t > 1
    before, at = cm.prefill(s, t - 1), cm.prefill(s, t)
    assert before.compute_s < before.memory_s and at.compute_s >= at.memory_s
    # about the ridge in tokens: a prompt's intensity is ~T FLOP per byte of bf16 weights (2 FLOPs / 2 bytes)
    assert 0.3 * s.card.ridge() < t < 3 * s.card.ridge()
    assert cm.crossover_prompt(s, batch=8) < t  # eight prompts share one read of the weights


def test_decode_turns_compute_bound_only_where_the_kv_cache_lets_it():
    gqa = setup("llama-3.1-8b", "a100-80gb")
    b = cm.crossover_batch(gqa, 512)
    assert b is not None and cm.decode_step(gqa, 512, b).bound == "compute"
    assert cm.decode_step(gqa, 512, b - 1).compute_s < cm.decode_step(gqa, 512, b - 1).memory_s
    # with one KV head per query head each sequence's cache costs as many bytes as its attention does FLOPs:
    # at a long context the step stays memory-bound at any batch
    assert cm.crossover_batch(setup("llama-2-7b", "h100-sxm"), 4000) is None


def test_a_small_model_on_a_fast_card_is_bound_by_launches():
    s = setup("smollm2-135m", "h100-sxm")
    step = cm.decode_step(s, 256)
    assert step.bound == "overhead"
    assert step.overhead_s > 3 * step.roof_s  # launches, not bytes: ~1 ms against ~0.1 ms of reading
    assert cm.decode_step(setup("llama-2-7b", "h100-sxm"), 256).bound == "memory"


def test_h200_speeds_up_only_the_bridge():
    h100, h200 = setup(card="h100-sxm"), setup(card="h200")
    prefill = cm.prefill(h100, 2048).seconds / cm.prefill(h200, 2048).seconds
    decode = cm.decode_step(h100, 2048, 16).seconds / cm.decode_step(h200, 2048, 16).seconds
    assert prefill < 1.05
    assert 1.15 < decode < 1.43  # more bandwidth, the same fixed step cost beside it


def test_batching_shares_a_decode_step_but_not_a_prefill():
    s = setup(card="h100-sxm")
    one, many = cm.cost(s, 2048, 256, 1), cm.cost(s, 2048, 256, 64)
    assert many.decode_s < one.decode_s / 10
    assert many.prefill_s == pytest.approx(one.prefill_s, rel=0.3)
    assert many.prefill_share > one.prefill_share


def test_tensor_parallelism_and_what_does_not_fit():
    with pytest.raises(EngineError, match=r"does not fit in 1 x 80 GB .*try --gpus 2"):
        cm.plan(setup("llama-2-70b"), 512, 64)
    two, four = cm.plan(setup("llama-2-70b", gpus=2), 512, 64), cm.plan(setup("llama-2-70b", gpus=4), 512, 64)
    assert four.tpot_s < two.tpot_s and four.decode.comm_s > two.decode.comm_s > 0
    with pytest.raises(EngineError, match="do not divide"):
        cm.plan(setup("llama-2-70b", gpus=3), 512, 64)
    with pytest.raises(EngineError, match="one chip"):
        cm.plan(setup("llama-2-7b", "m3-max", gpus=2), 512, 64)


def test_most_sequences_a_card_holds_and_grouped_query_attention():
    s = setup("llama-3.1-8b", "h100-sxm")
    n = cm.max_sequences(s, 4096)
    per_sequence = 4096 * 2 * 32 * 8 * 128 * 2
    assert n == int((80e9 * 0.9 - s.model.n_params * 2) // per_sequence)
    assert cm.max_sequences(s, 4096, mha=True) == int((80e9 * 0.9 - s.model.n_params * 2) // (per_sequence * 4))
    with pytest.raises(EngineError, match="hold"):
        cm.plan(s, 4096, 0, batch=n + 1)


def test_plan_reports_ttft_tpot_and_bounds():
    p = cm.plan(setup(card="a100-80gb"), 2048, 128)
    assert p.ttft_s == p.prefill.seconds and p.tpot_s == p.decode.seconds
    assert p.context == 2048 + 64 and p.first_step.seconds < p.last_step.seconds
    assert p.prefill.bound == "compute" and p.decode.bound == "memory"
    assert p.total_s == pytest.approx(p.ttft_s + 127 * p.tpot_s)


def test_bad_inputs_are_one_line():
    with pytest.raises(EngineError, match="valid: smollm2-135m"):
        model_shape("llama-9")
    with pytest.raises(EngineError, match="valid: a100-80gb, .*this-cpu"):
        cd.card("tpu-v9")
    with pytest.raises(EngineError, match="unknown dtype"):
        cm.plan(setup(dtype="int3"), 16, 4)
    with pytest.raises(EngineError, match="no fp8"):
        cm.plan(setup(card="a100-80gb", dtype="fp8"), 16, 4)
    with pytest.raises(EngineError, match="context window"):
        cm.plan(setup(), 4000, 200)
    with pytest.raises(EngineError, match="prompt tokens"):
        cm.plan(setup(), 0, 4)


def test_every_model_and_card_key_plans():
    for key in MODELS:
        assert cm.plan(setup(key, "h200", gpus=2 if key == "llama-2-70b" else 1), 64, 8).tpot_s > 0
    for key in cd.CARDS:
        assert cm.plan(setup("gpt2", key, "float32" if key == "laptop-cpu" else "float16"), 64, 8).ttft_s > 0


def test_this_machine_is_a_measured_card():
    c = cd.measured_card(200e9, 20e9, 16e9, "at 10:42")
    assert c.key == cd.THIS_MACHINE and "measured here at 10:42" in c.source and c.measured_at == "at 10:42"
    mine = cd.measured_card(200e9, 20e9, 16e9, "now", mbu=cd.Param(0.5, 0.5, 0.5, "measured here"))
    s = cm.Setup(model_shape("smollm2-135m").config, mine, "float32")
    assert mine.param("mbu").value == 0.5 and mine.param("mfu") == cd.CLASSES["cpu"].mfu
    assert cm.decode_step(s, 64).memory_s > cm.decode_step(dataclasses.replace(s, card=c), 64).memory_s
    with pytest.raises(EngineError, match="> 0"):
        cd.measured_card(0.0, 20e9, 16e9, "now")
