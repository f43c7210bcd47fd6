"""The physics the lesson states, computed where a number is needed, so every sentence holds on any machine.

Streamlit-free. Each function turns a model's shapes, a dtype or a card's spec sheet into the figure a sentence
quotes: GEMV intensity (2 FLOPs per weight / bytes per weight), the prompt length at which prefill crosses a ridge,
the KV cache's bytes next to the weights', the ridge points of the card presets (engine/perfmodel/roofline.py).
docs/lesson-physics.md lists each claim with where it holds and its source.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import ModelConfig
from engine.perfmodel.roofline import HARDWARE_PRESETS

MB = 1e6
# what "a CPU's ridge" spans: float32 vector units (AVX2 / AVX-512 / NEON) against DDR bandwidth; a matrix unit (Intel
# AMX in bf16) multiplies the FLOP/s many times and with it the ridge
CPU_RIDGE_WORDS = ("a few to a few dozen FLOP/byte on most CPUs' vector units (matrix units such as Intel's AMX, in "
                   "bf16, raise it many times)")


def gemv_intensity(bytes_per_weight: float) -> float:
    """FLOP per byte of a batch-1 decode step's matrix × vector: one multiply-add (2 FLOPs) per weight read."""
    return 2.0 / bytes_per_weight


def crossover_rows(ridge: float, bytes_per_weight: float) -> int:
    """How many rows must share each weight read for the matrix products to reach `ridge` FLOP/byte: prompt tokens in
    prefill, sequences in a decode step. Each row adds 2 FLOPs per weight, so intensity ≈ 2·rows / bytes per weight
    (attention, the KV cache and its writes left out)."""
    return max(1, round(ridge * bytes_per_weight / 2.0))


@dataclass(frozen=True)
class CacheAndWeights:
    """What one decode step of one sequence reads at `tokens` of context (estimate: each byte read once)."""
    tokens: int
    weight_bytes: float  # every weight, read once per step
    kv_bytes: float  # the whole KV cache of that context

    @property
    def kv_share_of_weights(self) -> float:
        return self.kv_bytes / self.weight_bytes if self.weight_bytes else float("nan")


def cache_and_weights(cfg: ModelConfig, bytes_per_number: float, tokens: int) -> CacheAndWeights:
    """The weights' and the KV cache's bytes at `tokens` of context, both stored at `bytes_per_number`."""
    return CacheAndWeights(int(tokens), cfg.weight_bytes(bytes_per_number),
                           float(tokens) * cfg.kv_bytes_per_token(int(bytes_per_number)))


def cache_sentence(cfg: ModelConfig, bytes_per_number: float, dtype_name: str, tokens: int, model: str = "") -> str:
    """'SmolLM2 in float32 at 8,192 tokens: 377 MB of KV cache against 538 MB of weights (70 %)' — computed."""
    cw = cache_and_weights(cfg, bytes_per_number, tokens)
    who = f"{model} in {dtype_name}" if model else dtype_name
    return (f"{who} at {tokens:,} tokens of context: {cw.kv_bytes / MB:,.0f} MB of KV cache against "
            f"{cw.weight_bytes / MB:,.0f} MB of weights ({cw.kv_share_of_weights:.0%}), computed from the model's shapes")


@dataclass(frozen=True)
class Card:
    name: str
    ridge: float  # FLOP per byte: peak FLOP/s ÷ bandwidth
    source: str


def cards() -> list[Card]:
    """The accelerator presets of engine/perfmodel/roofline.py (CPUs left out; each names its source), lowest ridge
    first."""
    found = [Card(h.name, h.ridge, h.source) for h in HARDWARE_PRESETS.values()]
    return sorted((c for c in found if "CPU" not in c.name.upper()), key=lambda c: c.ridge)


def card(word: str) -> Card | None:
    """The first card preset whose name holds `word` ('H100'), or None."""
    return next((c for c in cards() if word.lower() in c.name.lower()), None)


def ridge_range_words() -> str:
    """'from about 36 FLOP/byte (Apple M3 Max …) to about 403 (NVIDIA L4)' over the card presets (16-bit peaks)."""
    found = cards()
    if not found:
        return "tens to hundreds of FLOP/byte"
    low, high = found[0], found[-1]
    return (f"from about {low.ridge:,.0f} FLOP/byte ({low.name}) to about {high.ridge:,.0f} ({high.name}), from their "
            "spec sheets (an Apple GPU's FLOP/s an estimate)")


def gpu_prefill_crossover_words() -> str:
    """'on an NVIDIA H100 SXM in bf16 from roughly 300 tokens' (spec sheet), or a general phrase if the preset is gone."""
    h100 = card("H100")
    if h100 is None:
        return "on a data-centre GPU in bf16 from a few hundred tokens"
    tokens = crossover_rows(h100.ridge, 2)
    return f"on an {h100.name} in bf16 from roughly {round(tokens, -1):,.0f} tokens (its spec sheet's ridge)"


def prefill_bound_words() -> str:
    """The conditional statement of what bounds prefill, for any page that names it."""
    return ("compute-bound only above the device's ridge point, where enough tokens share each weight read: on a CPU's "
            f"vector units from a few tokens to a few dozen, {gpu_prefill_crossover_words()}; below it, even prefill "
            "waits on memory (or, for a small model on a GPU, on launching its kernels)")


def decode_bound_words() -> str:
    """The statement of what bounds a batch-1 decode step."""
    return (f"memory-bound at small batch: about {gemv_intensity(4):g} FLOP per byte in float32, {gemv_intensity(2):g} in "
            f"bf16, {gemv_intensity(1):g} in int8, below the ridge of GPUs (tens to hundreds) and of most CPUs (a few to a "
            "few dozen), so each step waits on reading the weights and the whole KV cache (a small model on a GPU waits "
            "on launching its kernels instead); B sequences sharing a step multiply that intensity by about B")
