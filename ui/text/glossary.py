"""The words a lecture on prefill and decode uses, each in two sentences, and where the dashboard shows it.

Definitions use the project's metric meanings (the same as vLLM's benchmarks, so numbers compare with real servers)
and the post-road fable (the valley = prefill, the bridge = decode). Streamlit-free; ui/controls/glossary_panel.py
draws it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ui.text import lesson_physics


@dataclass(frozen=True)
class Term:
    name: str  # as the pages write it
    long: str  # spelled out ("" when the name says it already)
    meaning: str  # what it is, in plain words
    where: str  # where the dashboard shows it


TERMS = (
    Term("Prefill", "", "The first phase of a request: the model reads all prompt tokens in one forward pass and "
         "writes their keys and values into the KV cache. Parallel: the wide valley. It is "
         f"{lesson_physics.prefill_bound_words()}.",
         "Prefill page; the first bar on Home and Timing"),
    Term("Decode", "", "The second phase: one forward pass per new token, each reading every weight and the whole KV "
         f"cache to produce a single token. Serial: the single-plank bridge, {lesson_physics.decode_bound_words()}.",
         "Decode page; the step-by-step ledger on Timing"),
    Term("TTFT", "time to first token", "From the request's start to its first generated token: prefill plus the "
         "first sampling. It grows with the prompt's length: about in proportion once the prompt passes the device's "
         "ridge, barely below it.", "Home, Prefill and Timing"),
    Term("TPOT", "time per output token", "(end-to-end time − TTFT) / (output tokens − 1): the average cost of one "
         "decode step. Each step reads the whole KV cache, so TPOT grows with the context (prompt and answer so "
         "far): slowly while the cache is small next to the weights, in proportion once it is not.",
         "Home, Timing and the Sweep lab"),
    Term("ITL", "inter-token latency", "The gap between two consecutive generated tokens, reported as p50 / p90 / p99 "
         "/ max; its mean is TPOT.", "Timing (each token's latency)"),
    Term("KV cache", "key-value cache", "The keys and values of every earlier token, kept per layer so that a decode "
         "step computes only the newest token's. It grows by one entry per token and is read in full at every step.",
         "Decode page (the cache growing, its bytes)"),
    Term("GEMM / GEMV", "matrix × matrix / matrix × vector", "Prefill multiplies a T × d block of activations by each "
         "weight matrix (GEMM: each weight read once serves T tokens); a batch-1 decode step multiplies one token's "
         "vector (GEMV: each weight read serves one multiply-add).", "Roofline & hardware lab; Where the time goes"),
    Term("Arithmetic intensity", "FLOP per byte", "Floating-point operations done per byte read from memory. A GEMV "
         f"does 2 FLOPs per weight: {lesson_physics.gemv_intensity(4):g} FLOP/byte in float32, "
         f"{lesson_physics.gemv_intensity(2):g} in bf16, {lesson_physics.gemv_intensity(1):g} in int8. A GEMM over T "
         "tokens does T times that, so it turns compute-bound once T carries it past the ridge point.",
         "Roofline & hardware lab"),
    Term("Roofline", "", "A chart of attainable FLOP/s against arithmetic intensity: a slanted roof (memory bandwidth) "
         "meets a flat roof (peak compute) at the ridge point. A long enough prompt's prefill sits under the flat roof, "
         "a small-batch decode step under the slanted one.", "Roofline & hardware lab"),
    Term("Ridge point", "", "Peak FLOP/s ÷ memory bandwidth: the intensity above which a kernel waits on arithmetic, "
         f"below which on memory: {lesson_physics.CPU_RIDGE_WORDS}; the GPU presets here run "
         f"{lesson_physics.ridge_range_words()}.", "Roofline & hardware lab; Batch lab"),
    Term("MFU", "model FLOPs utilisation", "The FLOP/s a phase achieved (model FLOPs / measured time) divided by the "
         "peak FLOP/s (here: what a matmul at the model's shapes reaches on this machine, measured). High for a prefill "
         "past the ridge, tiny for a small-batch decode step.",
         "Roofline & hardware lab"),
    Term("Memory-bound / compute-bound", "", "Whether a step waits for bytes to arrive from memory or for arithmetic "
         "to finish; speeding up the other one does not help. Which one depends on the step's intensity against "
         "the device's ridge, so the same phase can be one on a CPU and the other on a GPU.",
         "Home's diagnosis; Remedies lab"),
)


def markdown() -> str:
    """The glossary as one Markdown list (bold name, spelled-out name, meaning, where to see it)."""
    lines = []
    for term in TERMS:
        long = f" ({term.long})" if term.long else ""
        lines.append(f"- **{term.name}**{long}: {term.meaning} *Shown on: {term.where}.*")
    return "\n".join(lines)
