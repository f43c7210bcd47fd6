"""ui/text/sweep_numbers.py: the sweep and batch labs' numbers, moved out of the pages (tiny model, no runs)."""
from types import SimpleNamespace

from engine.labs.sweeps import SweepPoint, SweepResult
from engine.perfmodel.roofline import predicted_crossover_batch
from ui.text import sweep_numbers


def point(batch: int, itl_s: float, prompt: int = 8, out: int = 3) -> SweepPoint:
    return SweepPoint("batch", batch, prompt, out, 0.02, 0.01, itl_s, itl_s, 0.03, 400.0, batch / itl_s)


def test_sweep_plan_keeps_the_lengths_that_fit_and_says_why_others_do_not(tiny_llama):  # tiny-llama holds 256 tokens
    args, refused = sweep_numbers.sweep_plan(tiny_llama, "prompt", [16, 1024], 3)
    assert args == ([16], 3) and len(refused) == 1 and "1024" in refused[0]
    assert sweep_numbers.sweep_plan(tiny_llama, "output", [4, 8], 8) == (([4, 8], 8), [])
    args, refused = sweep_numbers.sweep_plan(tiny_llama, "prompt", [1024], 3)
    assert args is None and refused


def test_progress_texts_follow_the_latest_point():
    result = SweepResult("prompt", planned=[8, 16], points=[point(1, 0.01)])
    assert sweep_numbers.sweep_progress(result) == ("1/2: 8 in, 3 out, TTFT 20 ms", 0.5)
    batch = SweepResult("batch", planned=[1, 2, 4], points=[point(1, 0.01), point(2, 0.012)])
    assert sweep_numbers.batch_progress(batch) == ("B = 2: step 12 ms", 2 / 3)


def test_batch_memory_is_worded_and_an_absurd_batch_refused(tiny_llama):
    assert sweep_numbers.batch_memory_caption(tiny_llama, 4, 32, 8).startswith("Memory estimate for B = 4: weights ")
    assert sweep_numbers.batch_refusal(tiny_llama, [1, 2], 8, 4) is None
    assert "refused to avoid running out of memory" in sweep_numbers.batch_refusal(tiny_llama, [1, 10**7], 200, 50)


def test_batch_crossover_measured_and_predicted_from_the_ridge(tiny_llama):
    points = [point(1, 0.010), point(2, 0.011), point(4, 0.020)]
    peaks = SimpleNamespace(matmul_flops_per_s=1e11, copy_bytes_per_s=1e10)
    cross = sweep_numbers.batch_crossover(tiny_llama, points, peaks, 32, 8)
    assert (cross.measured, cross.ridge, cross.tried_max, cross.dtype_bytes) == (4, 10.0, 4, 4)
    assert cross.predicted == predicted_crossover_batch(tiny_llama.config, 36, 10.0, 4, 4)
    unmeasured = sweep_numbers.batch_crossover(tiny_llama, points, None, 32, 8)
    assert unmeasured.ridge is None and unmeasured.predicted is None and unmeasured.measured == 4
