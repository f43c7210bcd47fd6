"""ui/text/card_numbers.py and ui/figures/fig_cards.py: the card model's numbers and figures for the pages (§3, §4)."""
from types import SimpleNamespace

import pytest

import engine
from engine.perfmodel import card_model as cm
from engine.perfmodel import roofline as rl
from ui.figures import fig_cards
from ui.text import card_numbers as cn

PEAKS = SimpleNamespace(copy_bytes_per_s=40e9, matmul_flops_per_s=200e9, read_bytes_per_s=25e9, memory_bytes=16e9,
                        measured_at="10:42:00", device="cpu", dtype="float32")


def test_only_runs_measured_here_on_the_peaks_device_and_format_meet_this_machines_peaks():
    here = SimpleNamespace(source="local", settings={"model_spec": ["m"]}, device="cpu", dtype="float32")
    assert cn.measured_here(here) and cn.measured_here(here, PEAKS)
    assert not cn.measured_here(SimpleNamespace(source="local", settings={}, device="cpu", dtype="float32"))  # a file
    assert not cn.measured_here(SimpleNamespace(source="server", settings={"model_spec": ["m"]}))
    bf16 = SimpleNamespace(source="local", settings={"model_spec": ["m"]}, device="cpu", dtype="bfloat16")
    assert cn.measured_here(bf16) and not cn.measured_here(bf16, PEAKS)  # peaks measured for float32
    assert not cn.measured_here(None)
    # the labs set a run's MFU and MBU against the peaks only with its decode steps and its model's shapes too
    full = SimpleNamespace(**vars(here), steps=[object()], model_config=object())
    assert cn.run_against_peaks(full, PEAKS) and not cn.run_against_peaks(None, PEAKS)
    assert not cn.run_against_peaks(SimpleNamespace(**{**vars(full), "steps": []}), PEAKS)
    assert not cn.run_against_peaks(SimpleNamespace(**{**vars(full), "model_config": None}), PEAKS)
    assert not cn.run_against_peaks(SimpleNamespace(**{**vars(full), "dtype": "bfloat16"}), PEAKS)


def test_mfu_and_mbu_of_a_measured_run_against_this_machines_peaks(tiny_llama):
    trace = engine.generate(tiny_llama, list(range(1, 33)), 5, ignore_eos=True)
    mfu, mbu = cn.measured_utilisation(trace, PEAKS)
    pre, dec = rl.trace_points(trace)
    assert mfu.name == "MFU" and mfu.value == pytest.approx(pre.flops_per_s / 200e9)
    assert mbu.name == "MBU" and mbu.value == pytest.approx(dec.bytes_per_s / 25e9)  # the read, not the copy
    assert "measured 10:42:00" in mfu.words and "32 tokens" in mfu.words
    old = SimpleNamespace(copy_bytes_per_s=40e9, matmul_flops_per_s=200e9)  # peaks measured before the read was
    assert cn.measured_utilisation(trace, old)[1].peak == pytest.approx(20e9)
    assert cn.measured_utilisation(None, PEAKS) == []
    assert "above 100 %" not in mfu.words + mbu.words or max(mfu.value, mbu.value) > 1


def test_a_share_above_the_measured_peak_says_why_it_can_be(tiny_llama):
    """A run beating a measured peak is no run beyond the machine: the page says the peak is a measurement too."""
    trace = engine.generate(tiny_llama, list(range(1, 33)), 5, ignore_eos=True)
    low = SimpleNamespace(copy_bytes_per_s=2.0, matmul_flops_per_s=1.0, read_bytes_per_s=1.0, measured_at="10:42:00")
    mfu, mbu = cn.measured_utilisation(trace, low)
    assert mfu.value > 1 and "above 100 %: the peak is itself a measurement" in mfu.words
    assert mbu.value > 1 and "above 100 %: the bandwidth is itself a measurement" in mbu.words
    high = SimpleNamespace(copy_bytes_per_s=2e15, matmul_flops_per_s=1e18, read_bytes_per_s=1e15, measured_at="10:42:00")
    assert not any("above 100 %" in u.words for u in cn.measured_utilisation(trace, high))


def test_this_machine_is_the_measured_card():
    c = cn.this_card(PEAKS)
    assert c.bytes_per_s == 25e9 and c.measured_at == "at 10:42:00" and c.memory_bytes == 16e9
    cards = cn.cards_with(PEAKS)
    assert list(cards)[0] == c.name and len(cards) == len(cn.CARDS) + 1
    assert cn.where_from(c) == "measured here at 10:42:00" and cn.where_from(cards["NVIDIA L4"]) == "spec sheet"


def test_crossovers_measured_here_and_for_each_card(tiny_llama):
    words = cn.crossover_words(tiny_llama.config, "tiny", PEAKS, "float32", 64)
    s = cm.Setup(tiny_llama.config, cn.this_card(PEAKS), "float32")
    assert f"a prompt of {cm.crossover_prompt(s):,} tokens" in words and "peaks measured at 10:42:00" in words
    table = cn.crossover_table("llama-2-7b", "float16", 2048, PEAKS).set_index("card")
    h100 = table.loc["NVIDIA H100 SXM"]
    assert h100["valley compute-bound from (tokens)"] > table.loc["this machine (cpu)", "valley compute-bound from (tokens)"]
    assert "never" in h100["note"]  # one KV head per query head at 2k tokens: the bridge never turns
    gqa = cn.crossover_table("llama-3.1-8b", "float16", 512).set_index("card")
    assert gqa.loc["NVIDIA A100 80GB SXM", "bridge compute-bound from (batch)"] > 1  # GQA: fewer KV bytes a rider


def test_the_kv_wall_shows_gqa_buys_riders():
    table = cn.kv_wall_table(["llama-2-7b", "llama-3.1-8b"], "h100-sxm", 4096).set_index("model")
    mha, gqa = table.iloc[0], table.iloc[1]
    assert mha["most sequences"] == mha["most sequences with one KV head per query head"]
    assert gqa["most sequences"] > 3 * gqa["most sequences with one KV head per query head"]
    words = cn.kv_wall_words(table.reset_index(), "H100", 4096)
    assert "(memory - weights) / KV cache per sequence" in words and "without grouped-query attention" in words
    fig = fig_cards.kv_wall_figure(table.reset_index(), "H100", 4096)
    assert len(fig.data) == 2


def test_cost_by_stage_at_two_batches():
    costs = cn.cost_split("llama-3.1-8b", "h100-sxm", 2048, 256, (1, 64))
    assert [c.batch for c in costs] == [1, 64] and costs[1].prefill_share > costs[0].prefill_share
    words = cn.cost_words(costs, "H100", price_per_hour=2.5)
    assert "Batching shares each decode step" in words and "per thousand requests" in words
    capped = cn.cost_split("llama-2-7b", "a100-80gb", 2048, 128, (1, 64))
    assert capped[1].batch < 64  # 64 such caches do not fit beside the weights: the most that do
    none, why = cn.costs_or_message("llama-2-70b", "m3-max", 128, 16)
    assert none == [] and "does not fit" in why
    assert len(fig_cards.cost_figure(costs, "H100").data) == 2


def test_which_card_for_which_stage():
    table = cn.stage_cards("llama-3.1-8b", 2048, 256, {"NVIDIA H100 SXM": 2.5, "NVIDIA H200 SXM": 3.5}).set_index("card")
    assert table.loc["NVIDIA H200 SXM", "prefill device-ms"] == pytest.approx(table.loc["NVIDIA H100 SXM",
                                                                                        "prefill device-ms"], rel=0.1)
    decode = [c for c in table.columns if c.startswith("decode device-ms")][0]
    assert table.loc["NVIDIA H200 SXM", decode] < table.loc["NVIDIA H100 SXM", decode]
    assert table.loc["NVIDIA H100 SXM", "prefill per 1k requests"] < table.loc["NVIDIA H200 SXM", "prefill per 1k requests"]


def test_h100_to_h200_only_the_bridge_gets_faster():
    c = cn.compare_cards()
    assert c.flops_ratio == pytest.approx(1.0) and c.bandwidth_ratio == pytest.approx(4.8 / 3.35)
    assert c.prefill_speedup < 1.05 < 1.15 < c.decode_speedup < c.bandwidth_ratio
    words = cn.comparison_words(c)
    assert "only the bridge gets faster" in words and "x1.14" in words  # the published ratio beside the model's
    fig = fig_cards.comparison_figure(c)
    assert [round(v, 2) for v in fig.data[0].y][:2] == [round(c.prefill_speedup, 2), round(c.decode_speedup, 2)]
    assert "only the bridge gets faster" in fig.layout.title.text


def test_the_comparison_says_what_the_card_model_gives_not_what_the_fable_expects():
    """A pair of cards whose compute differs as well (A100 -> H100): both stages get faster, and the words and the
    figure's title say so instead of 'only the bridge'."""
    c = cn.compare_cards(slow="a100-80gb", fast="h100-sxm")
    assert c.prefill_speedup > cn.SAME_SPEED and c.decode_speedup > cn.SAME_SPEED
    words = cn.comparison_words(c)
    assert "only the bridge" not in words and f"the valley x{c.prefill_speedup:.2f}" in words
    assert "only the bridge" not in fig_cards.comparison_figure(c).layout.title.text


def test_this_machines_card_takes_a_measured_runs_mfu_and_mbu(tiny_llama):
    trace = engine.generate(tiny_llama, list(range(1, 33)), 9, ignore_eos=True)
    mfu, mbu = cn.measured_utilisation(trace, PEAKS)
    c = cn.this_card(PEAKS, trace)
    assert c.param("mfu").value == mfu.value and c.param("mbu").value >= mbu.value  # the step's compute taken out
    assert c.param("pass_s").value == 0 and c.param("layer_s").value == 0  # inside the measured step already
    assert c.param("mbu").source.startswith("measured here")
    _, dec = rl.trace_points(trace)
    s = cm.Setup(tiny_llama.config, c, "float32")
    kv = sorted(st.kv_length for st in trace.steps)[len(trace.steps) // 2]
    compute = dec.flops_per_s * dec.seconds / (PEAKS.matmul_flops_per_s * mfu.value)  # the step's FLOPs at the MFU
    if compute < 0.9 * dec.seconds:  # the rest of the step is its reading: the card gives back its own step
        assert cm.decode_step(s, kv).seconds == pytest.approx(dec.seconds, rel=0.02)
    else:  # a step about as fast as its FLOPs at the prefill's MFU, or faster (a fused decode step on a tiny model):
        # one MFU cannot give it back; the card's step is then never quicker than those FLOPs
        assert cm.decode_step(s, kv).seconds >= 0.999 * compute
    assert cn.this_card(PEAKS).param("mbu") == cn.cd.CLASSES["cpu"].mbu  # without a run: the class's estimate


def test_a_decode_step_grows_linearly_with_the_context_up_to_the_wall():
    table = cn.tpot_by_context("llama-3.1-8b", "h100-sxm", batch=8)
    t, ms = table["context (tokens)"].tolist(), table["TPOT (ms, est.)"].tolist()
    assert t[0] == 128 and t[-1] <= 131072 and all(b > a for a, b in zip(ms, ms[1:]))
    slopes = [(m2 - m1) / (t2 - t1) for t1, t2, m1, m2 in zip(t, t[1:], ms, ms[1:])]
    assert max(slopes) < 1.1 * min(slopes)  # a straight line: the KV bytes per token
    s = cn.setup("llama-3.1-8b", "h100-sxm")
    assert 8 * t[-1] * s.kv_bytes_per_token <= s.usable_bytes - s.weight_bytes  # stops where 8 caches fill the card
    assert len(fig_cards.context_figure(table, "Llama-3.1 8B", "H100", 8).data) == 1
