"""The Batch lab's words follow its measured points (generated from the numbers, never a fixed claim), and its verdict
is stated only where every round agrees by more than the rounds' spread."""
import math
import random

from engine.labs.repeats import CpuWait
from engine.labs.sweeps import SweepPoint
from ui.text import lab_text


def point(b: int, prefill_tps, decode_tps, path: str = "flat batched loop (any batch)") -> SweepPoint:
    """A batch point from each round's whole-batch tokens/s (a number: one round)."""
    pre = prefill_tps if isinstance(prefill_tps, list) else [prefill_tps]
    dec = decode_tps if isinstance(decode_tps, list) else [decode_tps]
    ttft = [b * 32 / r for r in pre]
    tpot = [b / r for r in dec]
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731 (odd counts in these tests)
    return SweepPoint(kind="batch", batch_size=b, prompt_tokens=32, output_tokens=8, ttft_s=med(ttft), decode_s=0.1,
                      tpot_s=med(tpot), itl_p50_s=med(tpot), total_s=0.2, prefill_tokens_per_s=b * 32 / med(ttft),
                      decode_tokens_per_s=b / med(tpot), ttft_runs=ttft, tpot_runs=tpot, decode_path=path)


def test_intro_makes_no_fixed_claim_about_saturation():
    assert "saturates" not in lab_text.BATCH_INTRO


def test_prefill_growing_3x_is_not_called_saturated():
    """The issue's sweep: prefill 246 -> 764 tokens/s from B = 1 to 16 (x3.1), still rising at the end."""
    pts = [point(1, [246] * 3, [15] * 3), point(2, 330, 29), point(4, 440, 55), point(8, 580, 100),
           point(16, [764] * 3, [170] * 3)]
    text = lab_text.batch_findings(pts)
    assert "246 → 764 tokens/s from B = 1 to B = 16 (×3.1; ideal ×16" in text
    prefill = text.split("\n\n")[0]
    assert "still growing" in prefill and "flat" not in prefill and "levels off" not in prefill
    assert "15 → 170 tokens/s" in text and "Batching paid the bridge more than the valley here (×11.3 vs ×3.1" in text


def test_flat_and_levelling_off_are_named_where_measured():
    flat = lab_text.batch_findings([point(1, 500, 10), point(2, 510, 20), point(4, 520, 40)])
    assert "flat — more sequences gave it nothing" in flat.split("\n\n")[0]
    level = lab_text.batch_findings([point(1, 200, 10), point(2, 400, 20), point(4, 420, 39), point(8, 430, 70)])
    assert "levels off from B = 2" in level.split("\n\n")[0]
    assert "still growing" in level.split("\n\n")[1]


def test_valley_gaining_more_is_said_so_when_every_round_agrees():
    text = lab_text.batch_findings([point(1, [100, 95, 105], [20, 21, 19]), point(4, [390, 380, 400], [30, 31, 29])])
    assert "batching paid the valley more than the bridge (×3.9 vs ×1.5" in text


def test_one_round_gives_no_verdict():
    text = lab_text.batch_findings([point(1, 100, 20), point(4, 390, 30)])
    assert "Measured in 1 round: a verdict needs at least 3" in text and "paid" not in text


def test_the_issues_three_runs_are_too_busy_to_tell():
    """Rounds like the issue's three sweeps (valley ×3.7 / bridge ×10.4, both ×1.5, valley ×9.9 / bridge ×1.0)."""
    pts = [point(1, [100, 100, 100], [10, 10, 10]), point(16, [370, 150, 990], [104, 15, 10])]
    text = lab_text.batch_findings(pts)
    assert "The machine was too busy to tell" in text and "paid" not in text
    assert "a spread of" in text and "larger than the weakest round's effect" in text


def test_noisy_rounds_never_give_opposite_verdicts():
    """Two batch sweeps on a busy machine (synthetic: no true difference between the segments' gains, each run's
    tokens/s stretched by up to ~e): the words withhold the verdict rather than flip it."""
    rng = random.Random(5)

    def sweep() -> str:
        stretch = lambda: math.exp(rng.gauss(0, 1.0))  # noqa: E731
        pts = [point(1, [100 * stretch() for _ in range(4)], [10 * stretch() for _ in range(4)]),
               point(16, [300 * stretch() for _ in range(4)], [30 * stretch() for _ in range(4)])]
        words = lab_text.batch_findings(pts)
        return "bridge" if "paid the bridge more" in words else "valley" if "paid the valley more" in words else "none"

    runs = [(sweep(), sweep()) for _ in range(200)]
    assert not [r for r in runs if set(r) == {"bridge", "valley"}]
    assert sum(v == "none" for r in runs for v in r) > 0.9 * 400


def test_one_point_asks_for_more():
    assert "at least two batch sizes" in lab_text.batch_findings([point(1, 100, 10)])


def test_the_path_note_names_the_path_and_keeps_the_fused_point_apart():
    pts = [point(1, 100, 20), point(2, 190, 38)]
    fused = point(1, 100, 50, path="fused C step (batch 1 only)")
    text = lab_text.path_note(pts, [fused])
    assert "same decode path, the **flat batched loop (any batch)**" in text
    assert "**fused C step (batch 1 only)** instead: 20.0 ms a step (median) against 50.0 ms on the loop" in text


def test_busy_banner_only_when_the_runs_waited_long():
    assert lab_text.busy_banner(CpuWait(0.01, 1.0, 3, True)) is None
    assert "busy" in lab_text.busy_banner(CpuWait(0.3, 1.0, 3, True))
    assert lab_text.busy_banner(CpuWait(0.0, 1.0, 3, False, "no schedstat")) is None
    assert "not measured (no schedstat)" in lab_text.cpu_wait_words(CpuWait(0.0, 1.0, 3, False, "no schedstat"))
    assert "waited 300 ms for a CPU in 1.0 s of timed work (30%" in lab_text.cpu_wait_words(CpuWait(0.3, 1.0, 3, True))
