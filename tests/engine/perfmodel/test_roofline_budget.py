"""Roofline formulas against hand-computed values for GPT-2 and SmolLM2; the budget reproduces the fable."""
import pytest

import engine
from engine.perfmodel import budget
from engine.perfmodel import roofline as rl
from engine.perfmodel.flops import decode_step_flops, prefill_flops
from ui.figures import fig_roofline
from ui.text import lab_text

SMOL = rl.MODEL_PRESETS["SmolLM2-135M"]
GPT2 = rl.MODEL_PRESETS["GPT-2 124M"]


def test_parameter_counts():
    assert GPT2.n_params == 124_439_808  # Hugging Face's count for gpt2, biases and LayerNorms included
    assert GPT2.n_params - GPT2.small_params == 124_318_464  # the matrices and lookup tables alone
    assert SMOL.n_params == 134_515_008
    assert rl.MODEL_PRESETS["GPT-2 1.5B"].n_params == 1_557_611_200


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_gpt2"])
def test_count_params_matches_the_loaded_weights(fixture, request):
    lm = request.getfixturevalue(fixture)
    assert lm.config.n_params * 4 == lm.config.weight_bytes(4) == lm.weight_bytes


def test_kv_bytes_per_token():
    assert SMOL.kv_bytes_per_token(4) == 46_080  # 2 x 30 layers x 3 KV heads x 64 x 4 bytes
    assert GPT2.kv_bytes_per_token(4) == 73_728  # 2 x 12 x 12 x 64 x 4


def test_smollm2_intensities_by_hand():
    blocks = 30 * (576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536)  # 106,168,320
    assert SMOL.matmul_params == blocks == 106_168_320
    weights = 134_515_008 * 4
    flops = 2 * blocks * 128 + 2 * 49152 * 576 + 4 * 30 * 9 * 64 * (128 * 129 // 2)
    assert flops == 27_806_367_744
    assert prefill_flops(SMOL, 128).total == flops
    assert rl.prefill_intensity(SMOL, 128) == pytest.approx(flops / (weights + 128 * 46_080))  # ≈ 51.1 FLOP/byte
    d_flops = 2 * blocks + 2 * 49152 * 576 + 4 * 30 * 9 * 64 * 128
    assert decode_step_flops(SMOL, 128) == d_flops == 277_807_104
    assert rl.decode_intensity(SMOL, 128) == pytest.approx(d_flops / (weights + 128 * 46_080))  # ≈ 0.51 FLOP/byte


def test_gpt2_prefill_by_hand():
    blocks = 12 * (768 * 3 * 768 + 768 * 768 + 2 * 768 * 3072)
    flops = 2 * blocks * 1024 + 2 * 50257 * 768 + 4 * 12 * 12 * 64 * (1024 * 1025 // 2)
    assert prefill_flops(GPT2, 1024).total == flops == 193_369_597_440
    nbytes = 124_439_808 * 2 + 1024 * 73_728 // 2  # bf16 weights and KV
    assert rl.prefill_intensity(GPT2, 1024, 1, 2, 2) == pytest.approx(flops / nbytes)


def test_intensity_grows_with_prompt_length_and_with_batch():
    assert rl.prefill_intensity(SMOL, 1024) > 7 * rl.prefill_intensity(SMOL, 128)
    one, eight = rl.decode_intensity(SMOL, 64, 1, 2, 2), rl.decode_intensity(SMOL, 64, 8, 2, 2)
    assert 6 < eight / one < 8.01  # ≈ B: the weights are read once for the whole batch
    assert 0.9 < one < 1.1  # bf16: about 1 FLOP per byte per sequence


def test_predicted_crossover_reaches_the_ridge():
    b = rl.predicted_crossover_batch(SMOL, 64, ridge=10.0)
    assert rl.decode_intensity(SMOL, 64, b) >= 10.0 > rl.decode_intensity(SMOL, 64, b - 1)
    assert rl.predicted_crossover_batch(SMOL, 64, ridge=0.1) == 1
    assert rl.predicted_crossover_batch(SMOL, 8000, ridge=1e6) is None


def test_presets_are_the_card_models_cards_and_models():
    assert rl.HARDWARE_PRESETS["NVIDIA H100 SXM"].key == "h100-sxm"
    assert rl.HARDWARE_PRESETS["NVIDIA H100 SXM"].ridge == pytest.approx(989.5e12 / 3350e9)
    assert len(rl.HARDWARE_PRESETS) >= 7 and "Llama-2 70B (GQA, 8 KV heads)" in rl.MODEL_PRESETS


def test_card_tables_say_what_does_not_fit_and_what_is_estimated():
    w = rl.WORKLOAD_PRESETS["Chat"]
    table = fig_roofline.predictions("Llama-2 70B (GQA, 8 KV heads)", w)
    assert len(table) == len(rl.HARDWARE_PRESETS)
    a100 = table.set_index("card").loc["NVIDIA A100 80GB SXM"]
    assert a100["fits"].startswith("no:") and "does not fit" in a100["fits"]  # 138 GB of bf16 weights
    small = fig_roofline.predictions("Llama-2 7B (MHA, 32 KV heads)", w).set_index("card")
    assert small.loc["NVIDIA H100 SXM", "TTFT (ms, est.)"] < small.loc["NVIDIA A100 80GB SXM", "TTFT (ms, est.)"]
    assert set(small["from"]) == {"spec sheet", "spec sheet (bandwidth); TFLOP/s an estimate", "estimate: a typical laptop"}
    assert small.loc["Laptop CPU (8 cores, DDR5-5600)", "from"] == "estimate: a typical laptop"  # not a spec sheet
    assert len(fig_roofline.prediction_bars(small.reset_index(), "t").data) == 2


def test_workload_shares_of_the_cost_grow_with_the_batch():
    shares = fig_roofline.workload_shares("Llama-3.1 8B (GQA, 8 KV heads)", "h100-sxm")
    one, many = shares.columns[2], shares.columns[3]
    assert "B = 1" in one and "B = 64" in many
    assert (shares[many] > shares[one]).all()  # the riders share decode steps, not prefills
    by_workload = shares.set_index("workload")[one]
    assert by_workload["Translation / summarisation"] > by_workload["Chat"] > by_workload["Code generation / writing"]


def test_trace_points_follow_the_formulas(tiny_llama):
    trace = engine.generate(tiny_llama, list(range(1, 33)), 5, ignore_eos=True)
    pre, dec = rl.trace_points(trace)
    assert pre.phase == "prefill" and dec.phase == "decode"
    assert pre.intensity == pytest.approx(rl.prefill_intensity(tiny_llama.config, 32))
    assert pre.flops_per_s == pytest.approx(prefill_flops(tiny_llama.config, 32).total / trace.prefill_seconds)
    assert pre.intensity > dec.intensity
    fig = fig_roofline.roofline_figure(1e11, 1e10, [pre, dec])
    assert [tr.name for tr in fig.data][-2:] == ["prefill (measured)", "decode (measured)"]
    assert len(fig_roofline.points_table([pre, dec], 1e11, 1e10)) == 2


def test_budget_reproduces_the_fable():
    results = list(budget.fable().values())
    assert results[0].saving == pytest.approx(0.10)  # p = 0.2, valley x2: 1 - (0.1 + 0.8)
    assert results[1].saving == pytest.approx(0.40)  # valley x2, bridge x1.6: 1 - (0.1 + 0.5)
    assert results[1].decode_speedup == pytest.approx(1.6)
    assert budget.amdahl(0.2, 1, 2).saving == pytest.approx(0.40)  # the bridge alone, doubled
    assert budget.amdahl(0.2, 2, 2).saving == pytest.approx(0.50)
    assert budget.amdahl(0.2).limit_if_only_prefill == pytest.approx(1.25)
    text = lab_text.fable_text(budget.fable())
    assert "10% saved" in text and "40% saved" in text


def test_budget_rejects_nonsense():
    with pytest.raises(engine.EngineError):
        budget.amdahl(1.5, 2, 2)
    with pytest.raises(engine.EngineError):
        budget.amdahl(0.2, 0, 2)
    with pytest.raises(engine.EngineError):
        budget.decode_speedup_for_saving(0.2, 2, 0.95)


def test_budget_figures():
    r = budget.amdahl(0.3, 2, 3)
    fig = fig_roofline.budget_figure(r)
    assert list(fig.data[0].x) == pytest.approx([30, 15]) and list(fig.data[1].x) == pytest.approx([70, 70 / 3])
    assert "saved" in lab_text.budget_text(r)
    assert len(fig_roofline.budget_curve(0.3).data) == 2
