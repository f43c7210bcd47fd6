"""The story pages' paragraphs (Home, Prefill, Decode): the fable's two bends told with the physics said where it holds.

Streamlit-free; the numbers in them come from ui/text/lesson_physics.py (computed from spec sheets and formulas).
"""
from __future__ import annotations

from ui.text import lesson_physics

HOME_VALLEY = (
    "**Prefill — the valley of Longmen Bay.** Every prompt token goes through the model in *one* forward pass, "
    "in parallel. Throughput comes first. Each weight read from memory is reused for all the prompt's tokens, so "
    "once the prompt is long enough the limit is **compute** (FLOP/s): on a CPU's vector units from a few tokens to a "
    "few dozen, "
    f"{lesson_physics.gpu_prefill_crossover_words()}; a shorter prompt still waits on memory. Its cost is the wait "
    "for the first word: **TTFT** (time to first token)."
)
HOME_BRIDGE = (
    "**Decode — the bridge.** Each new token needs the previous one, so tokens cross *one at a time*. "
    "Latency comes first; at a small batch the limit is **memory traffic**: every step reads all the weights and "
    "the whole KV cache (which grows with every token) to do very little arithmetic (a small model on a GPU waits on "
    "launching its kernels instead). Its cost is the **time per output token** (TPOT), paid again for every word, "
    "and a little dearer as the context grows."
)
PREFILL_INTRO = (
    "At the first bend, Longmen Bay, the whole convoy rides through a **wide valley side by side**: every prompt token "
    "goes through the model **in one forward pass**. Each layer multiplies a *T × d* block of activations by its "
    "weight matrices (matrix × matrix products), so every weight fetched from memory is reused for all *T* tokens: "
    f"about {lesson_physics.gemv_intensity(4):g}·T FLOP per byte in float32, T in bf16. Once that passes the device's "
    "**ridge point** the arithmetic, not the memory traffic, sets the pace and prefill is **compute-bound**: on a CPU's "
    f"vector units from a few tokens to a few dozen, {lesson_physics.gpu_prefill_crossover_words()}. Below it, even the valley "
    "waits on memory (a small model on a GPU waits on launching its kernels). Its cost is the time to first token "
    "(TTFT)."
)
DECODE_INTRO = (
    "At the second bend riders cross a **single-plank bridge one at a time**: each decode step feeds exactly "
    "**one** token per sequence, because the next token depends on this one. Yet that one token must stream **every "
    "weight** of the model and the **whole KV cache** (the keys and values of all earlier tokens) from memory, and "
    f"does about 2 FLOPs per weight read (matrix × vector): {lesson_physics.gemv_intensity(4):g} FLOP per byte in "
    f"float32, {lesson_physics.gemv_intensity(2):g} in bf16. At a small batch that is below the ridge of CPUs and GPUs "
    "alike, so decode is **memory-bound** (a small model on a GPU is bound by launching its kernels instead). Its cost "
    "is the gap between tokens, and it grows with the context: the cache a step reads gains one entry per token."
)


def decode_why(bandwidth: str, bytes_per_weight: int, dtype: str, riders: int = 1) -> str:
    """The Decode page's caption under a step's numbers (bandwidth: phase_numbers.bandwidth_text's words): about 2
    FLOPs per weight per sequence, so riders·2 / bytes per weight FLOP per byte of weights (the cache's bytes left out).

    One rider's GEMV (0.5 FLOP/byte in float32, 1 in bf16) is below any CPU's or GPU's ridge: memory-bound. Several
    riders multiply the intensity, and on a CPU (ridge a few FLOP/byte) eight float32 riders already reach it, so the
    caption then states the condition instead of the verdict."""
    intensity = riders * lesson_physics.gemv_intensity(bytes_per_weight)
    if riders <= 1:
        return (f"Why memory-bound: this step {bandwidth}, for about 2 FLOPs per weight: {intensity:g} FLOP per byte of "
                f"{dtype} weights, less still with the cache's bytes counted: below any CPU's or GPU's ridge, so arithmetic never "
                "sets the pace (for a model this small on a GPU, launching its kernels may, more than the bytes).")
    return (f"Memory-bound only while below the device's ridge: this step {bandwidth}, for about 2 FLOPs per weight for "
            f"each of its {riders} riders: {intensity:g} FLOP per byte of {dtype} weights (less with the caches' bytes "
            f"counted). A CPU's ridge is a few to a few dozen FLOP/byte, a GPU's tens to hundreds: enough riders carry a "
            "step past it (the Roofline lab measures this machine's).")


def gqa_caption(n_heads: int, n_kv_heads: int) -> str:
    """The Decode page's caption under the query-heads-to-KV-heads picture: grouped-query attention where the model
    has it (fewer KV heads than query heads), one KV head per query head where it does not (GPT-2, Llama-2 7B)."""
    group = n_heads // max(1, n_kv_heads)
    if group <= 1:
        return (f"One key/value head per query head ({n_heads} of each, no grouped-query attention): every query head "
                "has its own keys and values in the cache, so each cached token costs the most bytes.")
    heads = "head is" if n_kv_heads == 1 else "heads are"
    return (f"Grouped-query attention: only {n_kv_heads} key/value {heads} cached per layer, each read by {group} "
            f"query heads — the cache is {group}× smaller than with one KV head per query head.")


CROSSOVER_NOTE = ("Each card's ridge (peak FLOP/s ÷ bandwidth) and the card model's crossovers (estimates): the prompt "
                  "length where a prefill's arithmetic takes as long as its memory traffic, and the batch where a "
                  "decode step's does, at this run's context. This machine's row uses the peaks measured here and this "
                  "run's own MFU and MBU; the GPUs' come from their spec sheets, in bf16.")
