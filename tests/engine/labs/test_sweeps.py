"""Sweeps return what was asked and honour Cancel; batches give the same tokens as single runs; the memory guard refuses."""
import numpy as np
import pytest

import engine
from engine.labs import sweeps
from engine.perfmodel.fit import fit_ttft
from ui.figures import fig_sweeps
from ui.text import sweep_numbers


def test_prompt_ids_have_the_exact_length_and_differ_by_offset(tiny_llama):
    ids = sweeps.prompt_ids_of_length(tiny_llama, 300)
    assert len(ids) == 300  # longer than the sweep text: repeated
    assert sweeps.prompt_ids_of_length(tiny_llama, 16, offset=7) != sweeps.prompt_ids_of_length(tiny_llama, 16)
    with pytest.raises(engine.EngineError):
        sweeps.prompt_ids_of_length(tiny_llama, 0)


def test_prompt_sweep_measures_the_requested_lengths(tiny_llama):
    result = sweeps.sweep_prompt_lengths(tiny_llama, [8, 16, 32], output_tokens=4)
    assert [p.prompt_tokens for p in result.points] == [8, 16, 32]
    assert all(p.output_tokens == 4 and len(p.step_seconds) == 3 for p in result.points)
    assert all(p.ttft_s > 0 and p.decode_s > 0 for p in result.points)
    assert [n for n in result.points[1].step_kv_lengths] == [17, 18, 19]
    assert not result.cancelled and result.done == 3


def test_output_sweep_lengths_are_exact(tiny_gpt2):
    result = sweeps.sweep_output_lengths(tiny_gpt2, [2, 5, 9], prompt_tokens=12)
    assert [p.output_tokens for p in result.points] == [2, 5, 9]
    assert all(p.prompt_tokens == 12 for p in result.points)


def test_cancel_keeps_the_points_measured_so_far(tiny_llama):
    seen = []

    def on_point(result):
        seen.append(result.done)
        return result.done < 2  # False after the second point = Cancel

    result = sweeps.sweep_prompt_lengths(tiny_llama, [8, 16, 32, 64], output_tokens=3, on_point=on_point)
    assert seen == [1, 2]
    assert result.done == 2 and result.cancelled and result.planned == [8, 16, 32, 64]
    assert "Cancelled after 2 of 4" in fig_sweeps.sweep_status(result)


def test_lengths_beyond_the_context_are_skipped_or_refused(tiny_llama):
    limit = tiny_llama.config.max_seq_len
    allowed, refused = sweeps.split_allowed(tiny_llama, [16, limit + 10], 4)
    assert allowed == [(16, 4)] and len(refused) == 1 and str(limit) in refused[0]
    result = sweeps.sweep_prompt_lengths(tiny_llama, [16, limit + 10], output_tokens=4)
    assert [p.prompt_tokens for p in result.points] == [16]
    with pytest.raises(engine.EngineError, match="allows"):
        sweeps.sweep_prompt_lengths(tiny_llama, [limit + 10], output_tokens=4)


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_gpt2"])
def test_batch_outputs_equal_single_sequence_outputs(fixture, request):
    lm = request.getfixturevalue(fixture)
    prompts = [sweeps.prompt_ids_of_length(lm, 20, offset=5 * b) for b in range(4)]  # different, equal length
    batch = engine.generate_batch(lm, prompts, 6, ignore_eos=True)
    singles = [engine.generate(lm, p, 6, ignore_eos=True).output_ids for p in prompts]
    assert batch.batch_output_ids == singles
    same = engine.generate_batch(lm, [prompts[0]] * 3, 6, ignore_eos=True)
    assert same.batch_output_ids == [singles[0]] * 3


def test_batch_sweep_reports_each_batch_size(tiny_llama):
    result = sweeps.sweep_batch_sizes(tiny_llama, [4, 1, 2], prompt_tokens=8, output_tokens=4)
    assert [p.batch_size for p in result.points] == [1, 2, 4]
    for p in result.points:  # whole-batch throughput from the measured times
        assert p.prefill_tokens_per_s == pytest.approx(p.batch_size * 8 / p.ttft_s)
    table = fig_sweeps.sweep_table(result.points)
    assert list(table["batch"]) == [1, 2, 4] and b"batch" in fig_sweeps.sweep_csv(result.points)
    first = result.points[0]  # times shown in ms, rates left as tokens per second
    assert table["TTFT (ms)"][0] == pytest.approx(first.ttft_s * 1000, abs=0.01)
    assert table["prefill tok/s"][0] == pytest.approx(first.prefill_tokens_per_s, abs=0.01)


def test_memory_guard_refuses_absurd_batches_before_running(tiny_llama):
    with pytest.raises(engine.EngineError, match="refused"):
        sweeps.check_batch_memory(tiny_llama, 10**9, 32, 8)
    with pytest.raises(engine.EngineError, match="GiB"):
        sweeps.check_batch_memory(tiny_llama, 4, 32, 8, available=1000)
    with pytest.raises(engine.EngineError, match="whole number"):
        sweeps.check_batch_memory(tiny_llama, 0, 32, 8)
    calls = []
    with pytest.raises(engine.EngineError):
        sweeps.sweep_batch_sizes(tiny_llama, [1, 10**9], 8, 4, on_point=calls.append)
    assert calls == []  # nothing ran
    est = sweeps.check_batch_memory(tiny_llama, 2, 32, 8, available=10**12)
    cfg = tiny_llama.config
    assert est.kv_cache == 2 * 40 * cfg.kv_bytes_per_token(4)
    assert est.logits == 2 * cfg.vocab_size * 4
    assert est.total == est.weights + est.kv_cache + est.activations + est.logits


def test_available_memory_is_read():
    free = sweeps.available_memory_bytes("cpu")
    assert free is None or free > 0


def _point(batch, step):
    return sweeps.SweepPoint("batch", batch, 8, 4, 0.1, 3 * step, step, step, 0.1 + 3 * step, 1.0, batch / step)


def test_measured_crossover_is_the_first_batch_beyond_one_and_a_half():
    points = [_point(1, 0.010), _point(2, 0.011), _point(4, 0.014), _point(8, 0.016), _point(16, 0.030)]
    assert sweeps.measured_crossover(points) == 8
    assert sweeps.measured_crossover(points[:3]) is None
    assert sweeps.measured_crossover(points[:1]) is None


def test_fit_recovers_linear_and_quadratic_terms():
    t = np.array([16, 32, 64, 128, 256, 512])
    fit = fit_ttft(t, 0.01 + 2e-4 * t + 3e-7 * t**2)
    assert fit.a == pytest.approx(0.01) and fit.b == pytest.approx(2e-4) and fit.c == pytest.approx(3e-7)
    q = 3e-7 * 512**2
    assert fit.quadratic_share_at_max == pytest.approx(q / (0.01 + 2e-4 * 512 + q))
    linear = fit_ttft([10, 20], [1.0, 2.0])
    assert linear.c == 0 and linear.b == pytest.approx(0.1)
    assert fit_ttft([10], [1.0]) is None
    assert "quadratic term" in sweep_numbers.fit_text(fit)


def test_sweep_figures_show_the_measured_points(tiny_llama):
    result = sweeps.sweep_prompt_lengths(tiny_llama, [8, 16, 32], output_tokens=3)
    fit = fit_ttft([p.prompt_tokens for p in result.points], [p.ttft_s for p in result.points])
    fig = fig_sweeps.ttft_figure(result.points, fit)
    assert list(fig.data[0].x) == [8, 16, 32] and len(fig.data) == 3
    split = fig_sweeps.phase_split_figure(result.points)
    assert [tr.name for tr in split.data] == ["prefill (TTFT)", "decode (all steps)"]
    lat = fig_sweeps.decode_latency_figure(result.points)
    assert len(lat.data[0].x) == 6  # contexts 9,10 / 17,18 / 33,34
    pts = [_point(1, 0.010), _point(2, 0.011), _point(4, 0.020)]
    fig = fig_sweeps.batch_latency_figure(pts, 4, 8)
    assert {tr.name for tr in fig.data} >= {"measured crossover: B=4", "predicted crossover (estimate): B=8"}
    assert len(fig_sweeps.batch_throughput_figure(pts).data) == 3
