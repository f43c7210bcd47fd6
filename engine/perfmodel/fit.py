"""Fit TTFT ≈ a + b·T + c·T² to measured points, and say how well it fits.

Ordinary least squares with numpy on the measured (prompt length, TTFT) points. The linear term stands for the
weights' matmuls, the quadratic one for attention over the causal triangle — but three coefficients fitted to a
handful of noisy points can trade one term for another (a slow first point bends the curve), so the fit carries
its own quality: R², the largest residual, and the standard error of c (from the residuals, when there are more
points than coefficients). A statement about attention's share should come from the FLOP count
(engine/perfmodel/flops.py); the fit's share is only a check against it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TTFTFit:
    a: float  # seconds: fixed cost per request (launch, sampling, LM head on the last token)
    b: float  # seconds per prompt token: weights' matmuls, 2·params FLOPs per token
    c: float  # seconds per prompt token²: attention scores QKᵀ and P·V over the causal triangle
    n_points: int
    t_max: int  # the largest measured prompt length
    r2: float = float("nan")  # 1 − residual sum of squares / total sum of squares (NaN when TTFT never varied)
    max_residual: float = float("nan")  # seconds: the largest |measured − fitted| over the points
    c_stderr: float = float("nan")  # standard error of c (NaN with no spare points to estimate it)
    distinct: int = 0  # distinct prompt lengths measured

    def predict(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return self.a + self.b * t + self.c * t**2

    @property
    def quadratic_share_at_max(self) -> float:
        """Fraction of the fitted TTFT at the largest prompt that the T² term accounts for."""
        total = float(self.predict(self.t_max))
        return self.c * self.t_max**2 / total if total > 0 else float("nan")

    @property
    def quadratic_share_range(self) -> tuple[float, float]:
        """The T² share at the largest prompt with c moved by ± one standard error (NaN, NaN when unknown)."""
        if not math.isfinite(self.c_stderr):
            return float("nan"), float("nan")
        total = float(self.predict(self.t_max))
        if total <= 0:
            return float("nan"), float("nan")
        lo, hi = (self.c - self.c_stderr) * self.t_max**2, (self.c + self.c_stderr) * self.t_max**2
        # the total moves with c as well: share = q / (rest + q)
        rest = total - self.c * self.t_max**2
        return tuple(q / (rest + q) if rest + q > 0 else float("nan") for q in (lo, hi))


def fit_ttft(prompt_tokens, ttft_seconds) -> TTFTFit | None:
    """Least-squares fit with 3+ distinct lengths (2 distinct: linear only, c = 0); None with fewer."""
    t = np.asarray(prompt_tokens, dtype=float)
    y = np.asarray(ttft_seconds, dtype=float)
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    distinct = np.unique(t).size
    if distinct < 2:
        return None
    degree = 2 if distinct >= 3 else 1
    X = np.vander(t, degree + 1, increasing=True)  # (n, degree+1): columns 1, T, T²
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    residuals = y - X @ coef  # (n,)
    ss_res, ss_tot = float(residuals @ residuals), float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    spare = t.size - (degree + 1)  # points beyond the coefficients: what judges the fit
    c_stderr = float("nan")
    if degree == 2 and spare > 0:
        covariance = ss_res / spare * np.linalg.pinv(X.T @ X)  # (3, 3)
        c_stderr = float(math.sqrt(max(covariance[2, 2], 0.0)))
    c = float(coef[2]) if degree == 2 else 0.0
    return TTFTFit(a=float(coef[0]), b=float(coef[1]), c=c, n_points=int(t.size), t_max=int(t.max()), r2=r2,
                   max_residual=float(np.abs(residuals).max()), c_stderr=c_stderr, distinct=int(distinct))
