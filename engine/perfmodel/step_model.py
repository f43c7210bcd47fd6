"""How long one engine step takes: a fixed cost + a cost per token computed + a cost per KV byte read, fitted.

Serving simulators time every step from a model of this kind (Vidur, Agrawal et al. 2024, profiles each
operator; we keep its three terms): the fixed part is reading the weights once plus the host's loop, the
per-token part is the matmuls every computed token goes through (prefill chunks and decode rows alike), the
per-KV-byte part is attention reading each row's cache. The coefficients are fitted by ordinary least squares
(the mean step, tails included: a simulator adds steps up, so a step the OS delayed counts as it did in the
engine) from steps the engine recorded on this machine; for a spec-sheet card they are derived from its FLOP/s and bandwidth times the
efficiencies this machine reached — an estimate, labelled as one.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from engine.core.config import ModelConfig
from engine.errors import EngineError
from engine.perfmodel.roofline import Hardware


@dataclasses.dataclass(frozen=True)
class Step:
    """One recorded engine step: tokens it computed, KV bytes its rows held after it, its seconds."""
    tokens: int
    kv_bytes: float
    seconds: float
    kind: str = "decode"  # "prefill" (a prompt, alone), "decode" (one token per rider) or "mixed" (chunked)


@dataclasses.dataclass(frozen=True)
class StepModel:
    fixed_s: float  # per step: weights read once, the loop's own overhead
    per_token_s: float  # per token computed: 2·params FLOPs through the matmuls
    per_kv_byte_s: float  # per byte of KV cache the step's attention reads
    kv_bytes_per_token: float  # of the model this is for: turns cache lengths into bytes
    source: str = "set by hand"  # "measured ...", "estimate ...": said wherever it is shown

    def check(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_kv_byte_s", "kv_bytes_per_token"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise EngineError(f"the step model's {name} must be a finite number >= 0, not {value!r}")
        if self.fixed_s + self.per_token_s <= 0:
            raise EngineError("the step model needs a fixed cost or a cost per token > 0 (else steps take no time)")

    def seconds(self, tokens: int, kv_tokens: int) -> float:
        """A step computing `tokens` tokens whose rows hold `kv_tokens` cached tokens in all after it."""
        return self.fixed_s + self.per_token_s * tokens + self.per_kv_byte_s * kv_tokens * self.kv_bytes_per_token

    def split(self, tokens: int, kv_tokens: int, prefill_tokens: int, prefill_kv_tokens: int) -> float:
        """Seconds of one step owed to its prefill part (the fixed cost shared by tokens computed)."""
        if tokens <= 0:
            return 0.0
        share = prefill_tokens / tokens
        return (self.fixed_s * share + self.per_token_s * prefill_tokens
                + self.per_kv_byte_s * prefill_kv_tokens * self.kv_bytes_per_token)


@dataclasses.dataclass(frozen=True)
class StepFit:
    model: StepModel
    steps: list[Step]
    predicted: list[float]

    @property
    def residuals(self) -> list[float]:
        """Measured minus fitted seconds, per step."""
        return [s.seconds - p for s, p in zip(self.steps, self.predicted)]

    @property
    def rms_s(self) -> float:
        """Root mean square residual, seconds."""
        return math.sqrt(sum(r * r for r in self.residuals) / len(self.residuals))

    @property
    def relative_error(self) -> float:
        """Root mean square of (measured - fitted) / measured: 0.1 = steps typically within 10 %."""
        errors = [(s.seconds - p) / s.seconds for s, p in zip(self.steps, self.predicted)]
        return math.sqrt(sum(e * e for e in errors) / len(errors))


def fit_steps(steps: list[Step], kv_bytes_per_token: float, source: str = "measured on this machine") -> StepFit:
    """Ordinary least squares; a coefficient that comes out negative (noise) is dropped and refitted."""
    steps = [s for s in steps if math.isfinite(s.seconds) and s.seconds > 0 and s.tokens >= 0]
    if len(steps) < 3:
        raise EngineError(f"fitting a step model needs at least 3 timed steps, not {len(steps)}")
    if not (math.isfinite(kv_bytes_per_token) and kv_bytes_per_token > 0):
        raise EngineError(f"KV bytes per token must be a number > 0, not {kv_bytes_per_token!r}")
    y = np.array([s.seconds for s in steps])  # (N,)
    x = np.array([[1.0, s.tokens, s.kv_bytes] for s in steps])  # (N, 3): fixed, per token, per KV byte
    w = np.ones_like(y)  # (N,): every second counts alike (the mean step, as a simulator sums them)
    scale = np.maximum(np.abs(x).max(axis=0), 1e-30)  # (3,): columns to ~1 so lstsq stays well conditioned
    keep = [0, 1, 2]
    while True:
        coef, *_ = np.linalg.lstsq(x[:, keep] / scale[keep] * w[:, None], y * w, rcond=None)
        coef = coef / scale[keep]
        if (coef >= 0).all() or len(keep) == 1:
            break
        keep.pop(int(np.argmin(coef)))
    full = np.zeros(3)
    full[keep] = np.maximum(coef, 0.0)
    model = StepModel(float(full[0]), float(full[1]), float(full[2]), float(kv_bytes_per_token),
                      f"{source}: fitted from {len(steps)} steps")
    predicted = (x @ full).tolist()  # (N,)
    return StepFit(model, steps, predicted)


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """What this machine reached, as fractions of its own peaks: the part of a fit that travels to other cards."""
    compute: float  # achieved FLOP/s per computed token / peak FLOP/s
    bandwidth: float  # achieved bytes/s reading KV / peak bandwidth
    weights_bandwidth: float  # the fixed cost read as weights streamed / peak bandwidth (capped at 1)


def efficiency(model: StepModel, cfg: ModelConfig, peak_flops: float, peak_bytes_per_s: float,
               bytes_per_weight: float = 4) -> Efficiency:
    """The fit's coefficients as fractions of this machine's peak FLOP/s and bandwidth (each capped at 1)."""
    flops_per_token = 2.0 * (cfg.matmul_params + cfg.lm_head_params)
    compute = flops_per_token / model.per_token_s / peak_flops if model.per_token_s > 0 else 1.0
    bandwidth = 1.0 / model.per_kv_byte_s / peak_bytes_per_s if model.per_kv_byte_s > 0 else 1.0
    weights = cfg.weight_bytes(bytes_per_weight) / model.fixed_s / peak_bytes_per_s if model.fixed_s > 0 else 1.0
    return Efficiency(min(compute, 1.0), min(bandwidth, 1.0), min(weights, 1.0))


def for_hardware(eff: Efficiency, cfg: ModelConfig, hw: Hardware, bytes_per_weight: float = 2,
                 kv_dtype_bytes: int = 2, host_s: float = 0.0) -> StepModel:
    """A step model for `cfg` on card `hw` from its spec sheet times the efficiencies fitted here: an estimate.

    `host_s` adds a fixed per-step overhead (scheduler, launches) that the spec sheet does not show."""
    if not (hw.flops_per_s > 0 and hw.bytes_per_s > 0):
        raise EngineError(f"the card '{hw.name}' needs FLOP/s and bandwidth > 0")
    flops_per_token = 2.0 * (cfg.matmul_params + cfg.lm_head_params)
    weights_s = cfg.weight_bytes(bytes_per_weight) / (eff.weights_bandwidth * hw.bytes_per_s)
    return StepModel(weights_s + host_s, flops_per_token / (eff.compute * hw.flops_per_s),
                     1.0 / (eff.bandwidth * hw.bytes_per_s), float(cfg.kv_bytes_per_token(kv_dtype_bytes)),
                     f"estimate: {hw.name} spec sheet × efficiencies fitted on this machine "
                     f"(compute {eff.compute:.0%}, KV bandwidth {eff.bandwidth:.0%}, weights {eff.weights_bandwidth:.0%})")


def to_dict(model: StepModel) -> dict:
    return dataclasses.asdict(model)


def from_dict(data: dict) -> StepModel:
    model = StepModel(**{f.name: data[f.name] for f in dataclasses.fields(StepModel) if f.name in data})
    model.check()
    return model
