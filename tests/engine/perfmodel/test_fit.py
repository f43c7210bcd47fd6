"""engine/perfmodel/fit.py: the TTFT fit recovers a known curve and says how well it fits (R², residuals, c's
standard error), so a loose fit cannot pass for a measurement of attention."""
import math

import numpy as np
import pytest

from engine.perfmodel.fit import fit_ttft

T = np.array([16, 32, 64, 128, 256, 512], dtype=float)


def test_an_exact_curve_is_recovered_with_a_perfect_score():
    fit = fit_ttft(T, 0.01 + 2e-4 * T + 3e-7 * T**2)
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.01, 2e-4, 3e-7), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0) and fit.max_residual < 1e-9 and fit.c_stderr < 1e-12
    assert fit.distinct == 6 and fit.n_points == 6


def test_a_slow_first_point_gives_a_loose_fit_that_says_so():
    """The issue's shape: a linear TTFT whose first point came in slow bends c upwards; the residuals and c's standard
    error show it, and the share range around the fitted share is wide."""
    y = 1.2e-3 * T
    y[0] = 0.20  # the first run paid a cold start
    fit = fit_ttft(T, y)
    assert fit.r2 < 0.99 and fit.max_residual > 0.05
    lo, hi = fit.quadratic_share_range
    assert math.isfinite(lo) and hi - lo > 0.1


def test_three_lengths_leave_nothing_to_judge_the_fit():
    fit = fit_ttft([16, 32, 64], [0.02, 0.04, 0.09])
    assert math.isnan(fit.c_stderr) and math.isnan(fit.quadratic_share_range[0])


def test_two_lengths_fit_a_line_and_one_fits_nothing():
    line = fit_ttft([10, 20], [1.0, 2.0])
    assert line.c == 0.0 and line.distinct == 2
    assert fit_ttft([10, 10], [1.0, 1.1]) is None
