"""ui/text/fleet_text.py: the planner's cards from the card model, instances that hold the model, the bill and which
card for which stage — nothing read from a file recorded on another machine."""
from types import SimpleNamespace

from engine.perfmodel import cards as cd
from ui.text import card_numbers as cn
from ui.text import fleet_text as ft

PEAKS = SimpleNamespace(copy_bytes_per_s=40e9, matmul_flops_per_s=200e9, read_bytes_per_s=25e9, memory_bytes=16e9,
                        measured_at="10:42:00", device="cpu", dtype="float32")


def test_an_instance_is_the_fewest_cards_that_hold_the_model():
    assert ft.instance("Llama-2 70B (GQA, 8 KV heads)", cd.card("h100-sxm")).gpus == 2
    assert ft.instance("Llama-2 7B (MHA, 32 KV heads)", cd.card("h100-sxm")).gpus == 1
    m = ft.card_model("SmolLM2-135M", cn.cards_with(PEAKS)["this machine (cpu)"])
    assert "measured here at 10:42:00" in m.source and m.setup.dtype == "float32"


def test_the_planner_prices_instances_and_may_split_the_cards():
    w = ft.workload_of("custom", 512, 64)
    out = ft.run_planner(w, 50.0, 100, 500.0, 50.0, "Llama-2 70B (GQA, 8 KV heads)", "NVIDIA H100 SXM", 2.5, ["disagg"],
                         32, 2048, 50.0, decode_card="NVIDIA H200 SXM", decode_price=3.5)
    assert isinstance(out, dict) and "(2 cards an instance)" in out["step_model"]
    assert out["card"] == "NVIDIA H100 SXM (prefill) and NVIDIA H200 SXM (decode)"
    p = out["plans"]["disagg"]
    assert 0 <= p.money["prefill"] <= 1 and p.cost_per_million > 0
    assert ft.run_planner(w, 50.0, 100, 500.0, 50.0, "SmolLM2-135M", "TPU v9", 1.0, ["batch"], 8, 512, 50.0).startswith(
        "unknown card 'TPU v9'")
    assert ft.run_planner(w, 50.0, 100, 500.0, 50.0, "SmolLM2-135M", "NVIDIA L4", 1.0, [], 8, 512, 50.0) == \
        "pick at least one policy to plan"


def test_which_card_for_which_stage_names_the_cheapest_of_each():
    w = ft.workload_of("custom", 2048, 256)
    prices = {name: ft.example_price(name) for name in cn.cards_with()}
    table = ft.stage_cards("Llama-3.1 8B (GQA, 8 KV heads)", w, prices)
    words = ft.stage_words(table)
    assert "cheapest valley is" in words and "cheapest bridge" in words
    assert ft.stage_words(ft.stage_cards("Llama-3.1 8B (GQA, 8 KV heads)", w, {})).startswith("Set a price")
    assert not any(str(name).startswith("this machine") for name in table["card"])  # not measured: not offered
    assert any(str(c).startswith("this machine") for c in ft.stage_cards("SmolLM2-135M", w, prices, PEAKS)["card"])


def test_the_page_says_what_is_estimated_and_measured():
    assert "**Estimated**" in ft.HONESTY and "**Measured here**" in ft.HONESTY and "another machine" in ft.HONESTY
    assert ft.example_price("NVIDIA H100 SXM") == 2.5 and ft.example_price("this machine (cpu)") == 0.1
