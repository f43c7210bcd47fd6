"""The words a lecture on prefill and decode uses, each in two sentences, and where the dashboard shows it.

Definitions use the project's metric meanings (the same as vLLM's benchmarks, so numbers compare with real
servers) and the post-road fable (the valley = prefill, the bridge = decode). Streamlit-free; ui/controls/
glossary_panel.py draws it in the sidebar and in presenter mode's bar, so every page reaches it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    name: str  # as the pages write it
    long: str  # spelled out ("" when the name says it already)
    meaning: str  # what it is, in plain words
    where: str  # where the dashboard shows it


TERMS = (
    Term("Prefill", "", "The first phase of a request: the model reads all prompt tokens in one forward pass and "
         "writes their keys and values into the KV cache. Parallel and compute-bound: the wide valley.",
         "Prefill page; the first bar on Home and Timing"),
    Term("Decode", "", "The second phase: one forward pass per new token, each reading every weight and the whole KV "
         "cache to produce a single token. Serial and memory-bound: the single-plank bridge.",
         "Decode page; the step-by-step ledger on Timing"),
    Term("TTFT", "time to first token", "From the request's start to its first generated token: prefill plus the "
         "first sampling. It grows with the prompt's length.", "Home, Prefill and Timing"),
    Term("TPOT", "time per output token", "(end-to-end time − TTFT) / (output tokens − 1): the average cost of one "
         "decode step. It barely depends on the prompt's length.", "Home and Timing"),
    Term("ITL", "inter-token latency", "The gap between two consecutive generated tokens, reported as p50 / p90 / p99 "
         "/ max; its mean is TPOT.", "Timing (each token's latency)"),
    Term("KV cache", "key-value cache", "The keys and values of every earlier token, kept per layer so that a decode "
         "step computes only the newest token's. It grows by one column per token and is read in full at every step.",
         "Decode page (the cache growing, its bytes)"),
    Term("GEMM / GEMV", "matrix × matrix / matrix × vector", "Prefill multiplies a T × d block of activations by each "
         "weight matrix (GEMM: every weight reused T times); decode multiplies one token's vector (GEMV: each weight "
         "used once per byte fetched).", "Roofline & hardware lab; Where the time goes"),
    Term("Arithmetic intensity", "FLOP per byte", "Floating-point operations done per byte read from memory. High for "
         "GEMM (compute-bound), about 1–2 for GEMV (memory-bound).", "Roofline & hardware lab"),
    Term("Roofline", "", "A chart of attainable FLOP/s against arithmetic intensity: a slanted roof (memory bandwidth) "
         "meets a flat roof (peak compute) at the ridge point. Prefill sits under the flat roof, decode under the "
         "slanted one.", "Roofline & hardware lab"),
    Term("MFU", "model FLOPs utilisation", "The FLOP/s a phase achieved (model FLOPs / measured time) divided by the "
         "machine's peak FLOP/s, measured on this machine. High in prefill, tiny in decode.",
         "Roofline & hardware lab"),
    Term("Memory-bound / compute-bound", "", "Whether a step waits for bytes to arrive from memory or for arithmetic "
         "to finish; speeding up the other one does not help.", "Home's diagnosis; Remedies lab"),
)


def markdown() -> str:
    """The glossary as one Markdown list (bold name, spelled-out name, meaning, where to see it)."""
    lines = []
    for term in TERMS:
        long = f" ({term.long})" if term.long else ""
        lines.append(f"- **{term.name}**{long}: {term.meaning} *Shown on: {term.where}.*")
    return "\n".join(lines)
