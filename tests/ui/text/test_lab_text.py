"""The Batch lab's words follow its measured points (generated from the numbers, never a fixed claim)."""
from engine.labs.sweeps import SweepPoint
from ui.text import lab_text


def point(b: int, prefill_tps: float, decode_tps: float) -> SweepPoint:
    return SweepPoint(kind="batch", batch_size=b, prompt_tokens=32, output_tokens=8, ttft_s=0.1, decode_s=0.1,
                      tpot_s=b / decode_tps, itl_p50_s=b / decode_tps, total_s=0.2, prefill_tokens_per_s=prefill_tps,
                      decode_tokens_per_s=decode_tps)


def test_intro_makes_no_fixed_claim_about_saturation():
    assert "saturates" not in lab_text.BATCH_INTRO


def test_prefill_growing_3x_is_not_called_saturated():
    """The issue's sweep: prefill 246 -> 764 tokens/s from B = 1 to 16 (x3.1), still rising at the end."""
    pts = [point(1, 246, 15), point(2, 330, 29), point(4, 440, 55), point(8, 580, 100), point(16, 764, 170)]
    text = lab_text.batch_findings(pts)
    assert "246 → 764 tokens/s from B = 1 to B = 16 (×3.1; ideal ×16)" in text
    prefill = text.split("\n\n")[0]
    assert "still growing" in prefill and "flat" not in prefill and "levels off" not in prefill
    assert "15 → 170 tokens/s" in text and "Batching paid the bridge more than the valley here (×11.3 vs ×3.1)" in text


def test_flat_and_levelling_off_are_named_where_measured():
    flat = lab_text.batch_findings([point(1, 500, 10), point(2, 510, 20), point(4, 520, 40)])
    assert "flat — more sequences gave it nothing" in flat.split("\n\n")[0]
    level = lab_text.batch_findings([point(1, 200, 10), point(2, 400, 20), point(4, 420, 39), point(8, 430, 70)])
    assert "levels off from B = 2" in level.split("\n\n")[0]
    assert "still growing" in level.split("\n\n")[1]


def test_valley_gaining_more_is_said_so():
    text = lab_text.batch_findings([point(1, 100, 20), point(4, 390, 30)])
    assert "batching paid the valley more than the bridge (×3.9 vs ×1.5)" in text


def test_one_point_asks_for_more():
    assert "at least two batch sizes" in lab_text.batch_findings([point(1, 100, 10)])
