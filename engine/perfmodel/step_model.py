"""How long one engine step takes: a fixed cost + a cost per token computed + a cost per KV byte read, fitted.

Serving simulators time every step from a model of this kind (Vidur, Agrawal et al. 2024, profiles each
operator; we keep its three terms): the fixed part is reading the weights once plus the host's loop, the
per-token part is the matmuls every computed token goes through (prefill chunks and decode rows alike), the
per-KV-byte part is attention reading each row's cache. One sequence decoding alone may take a path of its own (a
CPU's C decode step, about half a batch's step on the EPYC of docs/serving.md), which no line through the batched
steps expresses; with enough such steps recorded, their cost is fitted on its own (`lone_s`). The coefficients are
fitted by ordinary least squares (the mean step, tails included: a simulator adds steps up, so a step the OS delayed
counts as it did in the engine) from steps the engine recorded on this machine. A card nobody measured here gets its
steps from the card model instead (CardStepModel, engine/perfmodel/card_model.py): an estimate, labelled as one.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from engine.errors import EngineError
from engine.perfmodel import card_model as cm


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
    lone_s: float | None = None  # a step of one token (a sequence decoding alone): its fixed and per-token cost

    def check(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_kv_byte_s", "kv_bytes_per_token", "lone_s"):
            value = getattr(self, name)
            if name == "lone_s" and value is None:
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise EngineError(f"the step model's {name} must be a finite number >= 0, not {value!r}")
        if self.fixed_s + self.per_token_s <= 0:
            raise EngineError("the step model needs a fixed cost or a cost per token > 0 (else steps take no time)")

    def seconds(self, tokens: int, kv_tokens: int, pairs: float | None = None, rows: int | None = None) -> float:
        """A step computing `tokens` tokens whose rows hold `kv_tokens` cached tokens in all after it (`pairs` and
        `rows` are the card model's; a fitted step model's per-token term holds them)."""
        compute = self.lone_s if tokens == 1 and self.lone_s is not None else self.fixed_s + self.per_token_s * tokens
        return compute + self.per_kv_byte_s * kv_tokens * self.kv_bytes_per_token

    def split(self, tokens: int, kv_tokens: int, prefill_tokens: int, prefill_kv_tokens: int,
              pairs: float | None = None, rows: int | None = None) -> float:
        """Seconds of one step owed to its prefill part (the fixed cost shared by tokens computed)."""
        if tokens <= 0:
            return 0.0
        if tokens == 1 and self.lone_s is not None:
            return self.seconds(1, prefill_kv_tokens) if prefill_tokens else 0.0
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


MIN_LONE_STEPS = 5  # one-token steps needed to fit their cost on their own (fewer: they stay on the line)


def fit_steps(steps: list[Step], kv_bytes_per_token: float, source: str = "measured on this machine") -> StepFit:
    """Ordinary least squares; a coefficient that comes out negative (noise) is dropped and refitted. With
    MIN_LONE_STEPS one-token steps or more (and 3 others), the line is fitted on the others and `lone_s` is the
    one-token steps' mean less their KV reading."""
    steps = [s for s in steps if math.isfinite(s.seconds) and s.seconds > 0 and s.tokens >= 0]
    if len(steps) < 3:
        raise EngineError(f"fitting a step model needs at least 3 timed steps, not {len(steps)}")
    if not (math.isfinite(kv_bytes_per_token) and kv_bytes_per_token > 0):
        raise EngineError(f"KV bytes per token must be a number > 0, not {kv_bytes_per_token!r}")
    lone = [s for s in steps if s.tokens == 1]
    apart = len(lone) >= MIN_LONE_STEPS and len(steps) - len(lone) >= 3
    fixed, per_token, per_kv = _line([s for s in steps if s.tokens != 1] if apart else steps)
    lone_s = max(0.0, float(np.mean([s.seconds - per_kv * s.kv_bytes for s in lone]))) if apart else None
    how = f"fitted from {len(steps)} steps" + (f", the {len(lone)} one-token steps on their own" if apart else "")
    model = StepModel(fixed, per_token, per_kv, float(kv_bytes_per_token), f"{source}: {how}", lone_s)
    predicted = [model.seconds(s.tokens, s.kv_bytes / kv_bytes_per_token) for s in steps]
    return StepFit(model, steps, predicted)


def _line(steps: list[Step]) -> tuple[float, float, float]:
    """(fixed, per token, per KV byte) seconds: the least-squares line through the steps, no coefficient below 0."""
    y = np.array([s.seconds for s in steps])  # (N,)
    x = np.array([[1.0, s.tokens, s.kv_bytes] for s in steps])  # (N, 3): fixed, per token, per KV byte
    scale = np.maximum(np.abs(x).max(axis=0), 1e-30)  # (3,): columns to ~1 so lstsq stays well conditioned
    keep = [0, 1, 2]  # every second counts alike (the mean step, as a simulator sums them)
    while True:
        coef, *_ = np.linalg.lstsq(x[:, keep] / scale[keep], y, rcond=None)
        coef = coef / scale[keep]
        if (coef >= 0).all() or len(keep) == 1:
            break
        keep.pop(int(np.argmin(coef)))
    full = np.zeros(3)
    full[keep] = np.maximum(coef, 0.0)
    return float(full[0]), float(full[1]), float(full[2])


@dataclasses.dataclass(frozen=True)
class CardStepModel:
    """A card's step times from the card model (engine/perfmodel/card_model.py): the fleet simulator's steps on a card
    nobody measured here. Same interface as StepModel; an estimate, and its `source` says so."""
    setup: cm.Setup
    source: str = ""

    def __post_init__(self):
        if not self.source:
            s = self.setup
            where = (f"measured here {s.card.measured_at}" if s.card.measured_at else s.card.origin)
            object.__setattr__(self, "source", f"estimate: the card model, {s.model_name or 'the model'} in {s.dtype} on "
                                               f"{s.gpus} x {s.card.name} ({where}, {s.card.klass.name} efficiencies)")

    @property
    def kv_bytes_per_token(self) -> float:
        return self.setup.kv_bytes_per_token

    @property
    def fixed_s(self) -> float:
        """A step's time with nothing to compute: reading the weights, launches, bookkeeping (as StepModel's term)."""
        return self.seconds(1, 1)

    def check(self) -> None:
        self.setup.check()

    def seconds(self, tokens: int, kv_tokens: int, pairs: float | None = None, rows: int | None = None) -> float:
        """A step computing `tokens` tokens whose rows hold `kv_tokens` cached tokens after it; `pairs` the query-key
        pairs its attention scores and `rows` the sequences that emit a token (default: a prefill from scratch when
        tokens == kv_tokens, else decode rows)."""
        fresh = tokens == kv_tokens
        if pairs is None:
            pairs = tokens * (tokens + 1) / 2 if fresh else kv_tokens
        if rows is None:
            rows = 1 if fresh else tokens
        return cm.mixed_step(self.setup, max(tokens, 1), max(kv_tokens, 1), pairs, rows).seconds

    def split(self, tokens: int, kv_tokens: int, prefill_tokens: int, prefill_kv_tokens: int,
              pairs: float | None = None, rows: int | None = None) -> float:
        """Seconds of one step owed to its prefill part: the step's time shared by the tokens computed."""
        if tokens <= 0:
            return 0.0
        return self.seconds(tokens, kv_tokens, pairs, rows) * prefill_tokens / tokens


def to_dict(model: StepModel) -> dict:
    return dataclasses.asdict(model)


def from_dict(data: dict) -> StepModel:
    model = StepModel(**{f.name: data[f.name] for f in dataclasses.fields(StepModel) if f.name in data})
    model.check()
    return model
