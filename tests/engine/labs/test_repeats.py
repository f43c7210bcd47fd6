"""Repeated measurements: medians and spreads, and a verdict that is held back, never flipped, when the machine's
noise is as large as the effect (synthetic measurements: the rule, not this machine's timing, is under test)."""
import math
import random
from types import SimpleNamespace

import pytest

from engine.labs import repeats
from engine.labs.repeats import Effect, Repeated, cpu_wait_of, effect_of


def test_repeated_reports_the_median_and_how_far_the_runs_lie_apart():
    r = Repeated.of([0.030, 0.020, float("nan"), 0.025, None])
    assert r.n == 3 and r.median == pytest.approx(0.025)
    assert r.spread == pytest.approx(0.030 / 0.020 - 1)
    assert math.isnan(Repeated.of([0.02]).spread) and math.isnan(Repeated.of([]).median)


@pytest.mark.parametrize("ratios, verdict", [
    ((2.0, 2.2, 2.4), repeats.FASTER),  # every repeat faster, even the weakest (×2.0) beyond the spread (20 %)
    ((0.5, 0.45, 0.55), repeats.SLOWER),
    ((1.3, 3.0, 0.8), repeats.NOISE),  # the busy machine of the issue: the repeats disagree on the direction
    ((1.10, 1.30, 1.05), repeats.NOISE),  # all faster, but by less than they lie apart (24 %)
    ((1.2, 2.0, 2.2), repeats.NOISE),  # the median (×2.0) clears the spread (83 %), the weakest (×1.2) does not
    ((2.0, 2.2), repeats.FEW),  # two repeats give no verdict
    ((), repeats.NONE),
])
def test_a_verdict_needs_agreeing_repeats_beyond_their_spread(ratios, verdict):
    assert Effect(ratios).verdict == verdict


def test_paired_effects_leave_out_a_partial_round():
    e = effect_of([4.0, 5.0, 6.0, 7.0], [2.0, 2.0, 2.0])
    assert e.measured == (2.0, 2.5, 3.0)


def _lab_run(rng: random.Random, true_ratio: float, sigma: float, rounds: int) -> str:
    """One lab run: `rounds` paired ratios of a true effect, each stretched by the machine's noise (log-normal)."""
    return Effect(tuple(true_ratio * math.exp(rng.gauss(0.0, sigma)) for _ in range(rounds))).verdict


@pytest.mark.parametrize("rounds", [3, 4])
def test_two_runs_on_a_busy_machine_never_state_opposite_verdicts(rounds):
    """No true effect, noise as in the issue's three Batch-lab runs (×10.4 vs ×3.7, ×1.5 vs ×1.5, ×9.9 vs ×1.0: a
    factor ~e between runs): pairs of runs withhold, they do not flip."""
    rng = random.Random(41)
    pairs = [(_lab_run(rng, 1.0, 1.0, rounds), _lab_run(rng, 1.0, 1.0, rounds)) for _ in range(300)]
    opposite = [p for p in pairs if {repeats.FASTER, repeats.SLOWER} <= set(p)]
    withheld = sum(v == repeats.NOISE for p in pairs for v in p)
    assert not opposite
    assert withheld > 0.85 * 2 * len(pairs)


def test_a_real_effect_gets_the_same_verdict_every_time():
    rng = random.Random(7)
    verdicts = {_lab_run(rng, 3.0, 0.1, 4) for _ in range(50)}
    assert verdicts == {repeats.FASTER}


def _trace(prefill, steps, prefill_wait, step_wait, measured=True):
    return SimpleNamespace(prefill_seconds=prefill, decode_seconds=sum(steps),
                           prefill_cpu_wait_seconds=prefill_wait, decode_cpu_wait_seconds=step_wait * len(steps),
                           cpu_wait_seconds=(prefill_wait + step_wait * len(steps)) if measured else None,
                           cpu_wait_note="" if measured else "no schedstat here")


def test_the_cpu_wait_of_a_labs_runs_adds_up_and_says_when_busy():
    quiet = cpu_wait_of([_trace(0.1, [0.02] * 5, 0.0, 0.0005)] * 3)
    assert quiet.measured and quiet.share == pytest.approx(0.0025 / 0.2) and not quiet.busy
    busy = cpu_wait_of([_trace(0.1, [0.02] * 5, 0.05, 0.01), _trace(0.1, [0.02] * 5, 0.0, 0.0)])
    assert busy.share == pytest.approx(0.1 / 0.4) and busy.busy
    unknown = cpu_wait_of([_trace(0.1, [0.02], 0, 0), _trace(0.1, [0.02], 0, 0, measured=False)])
    assert not unknown.measured and unknown.note == "no schedstat here" and not unknown.busy
    together = repeats.add_waits([quiet, busy])
    assert together.runs == 5 and together.waited_s == pytest.approx(quiet.waited_s + busy.waited_s)
