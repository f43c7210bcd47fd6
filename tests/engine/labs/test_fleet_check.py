"""The simulator against the real engine (tiny model, in this process): a loose check, and the fit's plumbing."""
import pytest

from engine.core.trace import DecodeStep
from engine.labs import fleet_check as fc
from engine.perfmodel.workload import Arrival


class _Trace:
    def __init__(self, n_prompt, prefill, steps):
        self.n_prompt, self.prefill_seconds, self.steps, self.kv_bytes_per_token = n_prompt, prefill, steps, 100


def test_steps_of_keeps_prefills_and_unstalled_gaps():
    trace = _Trace(10, 0.02, [DecodeStep(0.01, 11, 2200, riders=2), DecodeStep(0.05, 12, 2400, riders=2,
                                                                               stall_seconds=0.04)])
    steps = fc.steps_of([trace])
    assert [(s.kind, s.tokens, s.kv_bytes, s.seconds) for s in steps] == [("prefill", 10, 1000, 0.02),
                                                                         ("decode", 2, 2200, 0.01)]


def test_the_calibration_lets_one_sequence_decode_alone_before_the_bursts():
    """A lone sequence's steps may run a path of their own (the C decode step): the calibration records some."""
    arrivals = fc.calibration(context=2048, max_batch=4)
    assert arrivals[0].at_s == 0 and all(a.at_s >= fc.LONE_S for a in arrivals[1:])
    assert [sum(1 for a in arrivals[1:] if a.at_s == t) for t in sorted({a.at_s for a in arrivals[1:]})] == [1, 2, 4]


def test_row_error_and_tolerance():
    assert fc.Row("w", "TTFT p50", 0.10, 0.115).within
    assert not fc.Row("w", "TTFT p50", 0.10, 0.13).within


def test_simulator_follows_the_real_engine_loosely():
    """A burst of 16 requests through 4 rows: the simulator's span (every step its rules make, summed) within 25 %
    of the engine's, its TTFT p90 (the last wave's wait) within 50 %.

    The step model is fitted on this very replay's steps (check_in_sample), so a busy shared machine slows both
    sides alike on average. The medians (TTFT p50, TPOT) follow the machine's speed at that moment more than the
    rules when six people share two cores: benchmarks/fleet_check.py compares every metric, with separate calibration
    runs, and the page shows that table."""
    reqs = [Arrival(0.0, 16 + 8 * (i % 5), 24) for i in range(16)]
    fit, rows = fc.check_in_sample("tiny-llama", reqs, max_batch=4)
    assert len(fit.steps) > 16
    by = {r.metric: r for r in rows}
    assert abs(by["TTFT p90"].error) <= 0.5, by["TTFT p90"]
    assert abs(by["span"].error) <= 0.25, by["span"]


def test_fastest_calibration_is_kept():
    from engine.perfmodel.step_model import Step, fit_steps

    def fit(scale):
        return fit_steps([Step(n, 100.0 * n, scale * (0.01 + 0.001 * n)) for n in (1, 2, 4, 8)], 100.0)

    best = fc.fastest([fit(3.0), fit(1.0), fit(2.0)])
    assert best.model.fixed_s == pytest.approx(0.01)
    assert "fastest of 3" in best.model.source
