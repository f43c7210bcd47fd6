"""Fit TTFT ≈ a + b·T + c·T²: the linear term is the weights' matmuls, the quadratic one is attention.

Ordinary least squares with numpy on the measured (prompt length, TTFT) points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TTFTFit:
    a: float  # seconds: fixed cost per request (launch, sampling, LM head on the last token)
    b: float  # seconds per prompt token: weights' matmuls, 2·params FLOPs per token
    c: float  # seconds per prompt token²: attention scores QKᵀ and P·V over the causal triangle
    n_points: int
    t_max: int  # the largest measured prompt length

    def predict(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return self.a + self.b * t + self.c * t**2

    @property
    def quadratic_share_at_max(self) -> float:
        """Fraction of the fitted TTFT at the largest prompt that the T² term accounts for."""
        total = float(self.predict(self.t_max))
        return self.c * self.t_max**2 / total if total > 0 else float("nan")


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
    c = float(coef[2]) if degree == 2 else 0.0
    return TTFTFit(a=float(coef[0]), b=float(coef[1]), c=c, n_points=int(t.size), t_max=int(t.max()))
