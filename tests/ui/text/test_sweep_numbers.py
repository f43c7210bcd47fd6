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


def test_progress_texts_follow_the_latest_run():
    result = SweepResult("prompt", planned=[8, 16], points=[point(1, 0.01)], repeats=2)
    assert sweep_numbers.sweep_progress(result) == ("round 1 of 2: 8 in, 3 out, TTFT 20 ms (median so far)", 0.25)
    batch = SweepResult("batch", planned=[1, 2, 4], points=[point(1, 0.01), point(2, 0.012)], repeats=1)
    assert sweep_numbers.batch_progress(batch) == ("round 1 of 1: B = 2, step 12 ms (median so far)", 2 / 3)


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


def test_a_loose_fit_never_becomes_a_statement_about_attention():
    """A linear TTFT with a slow first point fits a large T² share; the FLOP count says ~8 % at 512 for SmolLM2: the
    text states what was fitted and how well, gives the count, and keeps the count."""
    import numpy as np

    from engine.perfmodel.fit import fit_ttft
    from engine.perfmodel.roofline import MODEL_PRESETS

    cfg = MODEL_PRESETS["SmolLM2-135M"]
    t = np.array([16, 32, 64, 128, 256, 512], dtype=float)
    y = 1.2e-3 * t
    y[0] = 0.20
    fit = fit_ttft(t, y)
    counted = sweep_numbers.attention_flop_share(cfg, 512)
    assert 0.05 < counted < 0.10  # computed from the shapes, as the Prefill page counts it
    text = sweep_numbers.fit_text(fit, cfg)
    assert "What was fitted" in text and "R² = " in text and "from the curve" in text
    assert f"attention at **{counted:.0%}**" in text and f"keep the FLOP count's {counted:.0%}" in text


def test_a_fit_that_agrees_with_the_count_says_so():
    from engine.perfmodel.fit import fit_ttft
    from engine.perfmodel.flops import prefill_flops
    from engine.perfmodel.roofline import MODEL_PRESETS

    cfg = MODEL_PRESETS["SmolLM2-135M"]
    lengths = [16, 32, 64, 128, 256, 512]
    seconds = [prefill_flops(cfg, t).total / 5e10 for t in lengths]  # time proportional to the FLOP count
    assert "the two agree" in sweep_numbers.fit_text(fit_ttft(lengths, seconds), cfg)


def test_the_decode_note_computes_the_cache_from_the_shapes():
    """SmolLM2 in float32 at its 8,192-token window: ~377 MB of KV cache against ~538 MB of weights, from the config."""
    from engine.perfmodel.roofline import MODEL_PRESETS
    from ui.text import lab_text

    cfg = MODEL_PRESETS["SmolLM2-135M"]
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * cfg.max_seq_len
    text = lab_text.decode_context_text(cfg, "float32", [40, 300], "SmolLM2-135M")
    assert f"{kv / 1e6:,.0f} MB of KV cache" in text and f"{cfg.n_params * 4 / 1e6:,.0f} MB of weights" in text
    assert "grows linearly with the context" in text and "hardly moves" not in text
