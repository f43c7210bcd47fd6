"""Roofline arithmetic: intensities of prefill and decode, where a measured run sits under the roof, the presets.

Arithmetic intensity = FLOPs / bytes moved. Prefill does 2·params FLOPs per prompt token on ONE read
of the weights (intensity grows with T); decode does 2·params FLOPs per sequence per step on a full
read of weights + KV cache (intensity grows with batch B). A phase is compute-bound when its
intensity is above the machine's ridge point (peak FLOP/s ÷ bandwidth), memory-bound below it.
References: Williams, Waterman & Patterson, "Roofline" (2009); Kaplan et al. (2020) for 2·N FLOPs/token;
Pope et al., "Efficiently Scaling Transformer Inference" (2022). TTFT and TPOT on a card: engine/perfmodel/card_model.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import ModelConfig, dtype_bytes
from engine.perfmodel.card_model import smallest
from engine.perfmodel.cards import CARDS
from engine.perfmodel.flops import decode_step_bytes, decode_step_flops, prefill_bytes, prefill_flops
from engine.perfmodel.model_shapes import MODELS


@dataclass(frozen=True)
class Hardware:
    """A card's spec sheet as the roofline figures draw it; its times come from engine/perfmodel/card_model.py."""
    name: str
    flops_per_s: float  # dense bf16/fp16 matmul peak (spec sheet), FLOP/s
    bytes_per_s: float  # memory bandwidth (spec sheet), bytes/s
    memory_bytes: float  # device memory
    source: str  # where the numbers come from
    key: str = ""  # the card's key in engine/perfmodel/cards.py

    @property
    def ridge(self) -> float:
        """FLOP per byte at which a kernel stops being memory-bound: the roofline's corner."""
        return self.flops_per_s / self.bytes_per_s


# the cards and models by the names the pages show (engine/perfmodel/cards.py and model_shapes.py hold them)
HARDWARE_PRESETS: dict[str, Hardware] = {c.name: Hardware(c.name, c.peak("fp16"), c.bytes_per_s, c.memory_bytes, c.source,
                                                          c.key) for c in CARDS.values()}
MODEL_PRESETS: dict[str, ModelConfig] = {m.name: m.config for m in MODELS.values()}


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_tokens: int
    output_tokens: int
    example: str


WORKLOAD_PRESETS: dict[str, Workload] = {w.name: w for w in [
    Workload("Translation / summarisation", 2000, 200, "long input, short output"),
    Workload("Chat", 300, 300, "balanced turn"),
    Workload("Code generation / writing", 200, 1500, "short input, long output"),
]}


def prefill_intensity(cfg: ModelConfig, T: int, B: int = 1, bytes_per_weight: float = 4, kv_dtype_bytes: int = 4) -> float:
    return prefill_flops(cfg, T, B).total / prefill_bytes(cfg, T, B, bytes_per_weight, kv_dtype_bytes)


def decode_intensity(cfg: ModelConfig, S: int, B: int = 1, bytes_per_weight: float = 4, kv_dtype_bytes: int = 4) -> float:
    """FLOP per byte of a decode step whose token attends over S cached tokens."""
    return decode_step_flops(cfg, S, B) / decode_step_bytes(cfg, S, B, bytes_per_weight, kv_dtype_bytes)


def predicted_crossover_batch(cfg: ModelConfig, S: int, ridge: float, bytes_per_weight: float = 4,
                              kv_dtype_bytes: int = 4, max_batch: int = 65536) -> int | None:
    """Smallest batch whose decode intensity reaches the ridge point (None if the KV cache keeps it below)."""
    return smallest(lambda b: decode_intensity(cfg, S, b, bytes_per_weight, kv_dtype_bytes) >= ridge, 1, max_batch)


@dataclass(frozen=True)
class MeasuredPoint:
    """Where a measured phase sits on the roofline: its intensity (formula) and its achieved rate (measured time)."""
    phase: str
    intensity: float  # FLOP per byte moved (formula for this model and shape)
    flops_per_s: float  # achieved: formula FLOPs / measured seconds
    bytes_per_s: float  # achieved: formula bytes / measured seconds
    seconds: float


def trace_points(trace) -> list[MeasuredPoint]:
    """Prefill and decode points of a Trace: the prefill pass, and the median decode step at its mean context."""
    cfg = trace.model_config
    nbytes = dtype_bytes(trace.dtype)
    B, T = trace.batch_size, trace.n_prompt
    points = []
    if trace.prefill_seconds > 0:
        f, b = prefill_flops(cfg, T, B).total, prefill_bytes(cfg, T, B, nbytes, nbytes)
        points.append(MeasuredPoint("prefill", f / b, f / trace.prefill_seconds, b / trace.prefill_seconds,
                                    trace.prefill_seconds))
    if trace.steps:
        secs = sorted(s.seconds for s in trace.steps)
        median = secs[len(secs) // 2]
        S = sorted(s.kv_length for s in trace.steps)[len(trace.steps) // 2]
        f, b = decode_step_flops(cfg, S, B), decode_step_bytes(cfg, S, B, nbytes, nbytes)
        points.append(MeasuredPoint("decode", f / b, f / median, b / median, median))
    return points
