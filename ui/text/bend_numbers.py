"""The two bends' physics on the story pages, live: the MFU of the run's prefill and the MBU of its decode steps against
this machine's measured peaks, where each bend turns compute-bound (measured here from the labs' sweeps, computed for
each card), and the KV-cache wall (decode steps against the context; the most sequences a card holds).

Streamlit-free. "Measured here" means in this session, on this machine; the card model's numbers are estimates and say
so (ui/text/card_numbers.py).
"""
from __future__ import annotations

import math

import pandas as pd

from engine.errors import EngineError
from engine.labs.repeats import FASTER, FEW, MIN_REPEATS, NOISE, SLOWER, effect_of
from engine.labs.sweeps import measured_crossover
from engine.perfmodel import card_model as cm
from ui.text import card_numbers as cn

GPU_DTYPE = "float16"  # the spec-sheet cards are compared in bf16 / fp16, as models are served there
PEAKS_NEEDED = ("MFU and MBU compare this run with what this machine itself reaches: a matmul at the model's shapes "
                "and a streaming read, measured once per session (a few seconds).")


def utilisation(trace, peaks, name: str):
    """The run's MFU (prefill) or MBU (decode) against the measured peaks (card_numbers.Utilisation), or None."""
    return next((u for u in cn.measured_utilisation(trace, peaks) if u.name == name), None)


def _setup(cfg, card, dtype: str, name: str) -> cm.Setup:
    the_dtype = dtype if card.device_class == "cpu" else GPU_DTYPE
    return cm.Setup(cfg, card, "float32" if the_dtype not in cm.DTYPES else the_dtype, 1, name)


def crossovers_by_card(cfg, name: str, dtype: str, peaks, trace, context: int) -> pd.DataFrame:
    """For this machine (from its measured peaks and the run's MFU and MBU) and every spec-sheet card: the prompt length
    where the valley turns compute-bound and the batch where the bridge does at `context` tokens (card model)."""
    rows = []
    for card_name, card in cn.cards_with(peaks, trace).items():
        s = _setup(cfg, card, dtype, name)
        try:
            ridge = card.ridge(s.fmt.compute)
        except EngineError as e:
            rows.append({"card": card_name, "from": cn.where_from(card), "format": s.dtype, "note": str(e)})
            continue
        batch = cm.crossover_batch(s, context)
        rows.append({"card": card_name, "from": cn.where_from(card), "format": s.dtype,
                     "ridge (FLOP/byte)": round(ridge, 1), "valley compute-bound from (tokens)": cm.crossover_prompt(s),
                     "bridge compute-bound from (batch)": batch,
                     "note": "" if batch is not None else "the bridge never: each rider's KV cache adds bytes as fast"})
    return pd.DataFrame(rows)


def valley_measured(result, model: str) -> str:
    """Where this machine's prompt sweep (the Sweep lab, this session) shows the valley turning compute-bound: between
    two prompt lengths, TTFT grows at least like the square root of the prompt in every round (by more than the
    rounds' spread) once compute sets the pace; it stays near flat while reading the weights does."""
    if result is None or result.model != model or len(result.points) < 2:
        return ("Measured here: not yet. Run a prompt-length sweep in the **Sweep lab** (this model): the first prompt "
                "length whose TTFT clearly grows with the prompt is where the valley turns compute-bound.")
    pts = sorted(result.points, key=lambda p: p.prompt_tokens)
    for a, b in zip(pts, pts[1:]):
        scale = math.sqrt(b.prompt_tokens / a.prompt_tokens)
        e = effect_of(b.ttft_runs, [t * scale for t in a.ttft_runs])
        grown = b.ttft_s / a.ttft_s
        if len(e.measured) < MIN_REPEATS:
            return (f"Measured here: the Sweep lab's prompt sweep has fewer than {MIN_REPEATS} rounds, too few to say "
                    "where TTFT starts to grow with the prompt.")
        if e.verdict == NOISE:
            return (f"Measured here: too busy to tell. From {a.prompt_tokens:,} to {b.prompt_tokens:,} tokens TTFT "
                    f"grew ×{grown:.2f}, and the sweep's rounds lie too far apart to say which bound set the pace.")
        if e.verdict == FASTER:
            where = ("already at the shortest prompt measured" if a is pts[0] else f"between {a.prompt_tokens:,} and "
                     f"{b.prompt_tokens:,} tokens")
            return (f"Measured here (Sweep lab): the valley is compute-bound {where}: from {a.prompt_tokens:,} to "
                    f"{b.prompt_tokens:,} tokens TTFT grew ×{grown:.2f} for ×{b.prompt_tokens / a.prompt_tokens:g} the "
                    "tokens, in every round faster than the square root of the prompt (this page's mark of arithmetic "
                    "setting the pace: a pass bound by reading the weights barely grows).")
        if e.verdict != SLOWER:
            break
    return (f"Measured here (Sweep lab): up to {pts[-1].prompt_tokens:,} tokens TTFT grew more slowly than the square root "
            "of the prompt in every round: the valley was still bound by reading the weights.")


def bridge_measured(result, model: str) -> str:
    """Where this machine's batch sweep (the Batch lab, this session) shows the bridge no longer bound by reading the
    weights."""
    if result is None or result.model != model or len(result.points) < 2:
        return ("Measured here: not yet. Run a batch sweep in the **Batch lab** (this model): the first batch whose "
                "decode step takes clearly longer than one rider's is where the bridge stops being bound by reading the "
                "weights (compute-bound where the batch has reached the ridge).")
    cross = measured_crossover(result.points)
    top = max(p.batch_size for p in result.points)
    path = result.points[0].decode_path
    if cross is None:
        return (f"Measured here (Batch lab, {path}): up to B = {top} no decode step took more than 1.5× the smallest "
                "batch's in every round by more than the rounds' spread: the bridge stayed bound by reading the weights "
                "(or the machine was too busy to show it).")
    return (f"Measured here (Batch lab, {path}): the bridge stops being bound by reading the weights at B = {cross}, "
            "the first batch whose step took more than 1.5× the smallest batch's in every round (this page's mark: a "
            "step bound by reading the weights barely grows with B; past it, the batch's arithmetic and each rider's "
            "own work, its KV cache and attention, set the pace: compute-bound only where the batch has reached the "
            "ridge).")


def context_words(sweep) -> str:
    """What the decode-step-against-context sweep measured, beside the bytes a step reads (an estimate from shapes);
    how the step grew is stated only where every round agrees (its rounds are paired: each measured every context)."""
    pts = [p for p in sweep.points if p.step.n]
    if len(pts) < 2:
        return "Measure at least two contexts to see the step grow."
    lo, hi = pts[0], pts[-1]
    read = lambda p: sweep.weight_bytes + p.kv_bytes  # noqa: E731 (a step reads every weight and the cache once)
    grew = effect_of(hi.step_s, lo.step_s)
    bytes_words = (f"A step reads the weights ({sweep.weight_bytes / 1e6:,.0f} MB) and the whole KV cache "
                   f"({hi.kv_bytes / 1e6:,.0f} MB at {hi.context:,} tokens): ×{read(hi) / read(lo):.2f} the bytes from "
                   f"{lo.context:,} to {hi.context:,} tokens (estimate from the shapes).")
    steps = (f"a decode step took {lo.step.median * 1e3:,.1f} ms after {lo.context:,} tokens and "
             f"{hi.step.median * 1e3:,.1f} ms after {hi.context:,} (medians of {hi.step.n} rounds)")
    if grew.verdict == FASTER:
        told = f"Measured here on the {sweep.path}: {steps}, ×{grew.median:.2f} longer in every round."
    elif grew.verdict == FEW:
        told = f"Measured here on the {sweep.path}: {steps}; too few rounds to say how much it grew."
    else:
        told = (f"Measured here on the {sweep.path}: {steps}, but the rounds put the long context's step at "
                f"×{min(grew.measured):.2f} to ×{max(grew.measured):.2f} the short one's: the machine was too busy to "
                "tell how the step grew. Measure again when it is quieter.")
    return (f"{told} {bytes_words} The cache held stand-in numbers, not a real prompt: a step's time depends on how "
            f"many numbers it reads, not their values. The largest context is set by {sweep.limited_by}.")


def wall_table(cfg, name: str, dtype: str, peaks, trace, tokens: int) -> pd.DataFrame:
    """The most sequences of `tokens` tokens each card holds beside this model's weights, with its grouped-query
    attention and as if every query head had its own KV head (card model; this machine's memory measured here)."""
    rows = []
    for card_name, card in cn.cards_with(peaks, trace).items():
        s = _setup(cfg, card, dtype, name)
        if not card.memory_bytes:
            continue
        rows.append({"card": card_name, "format": s.dtype, "memory (GB)": round(card.memory_bytes / 1e9, 1),
                     "weights (GB)": round(s.weight_bytes / 1e9, 2),
                     "KV per sequence (MB)": round(s.kv_bytes_per_token * tokens / 1e6, 1),
                     "most sequences": cm.max_sequences(s, tokens),
                     "with one KV head per query head": cm.max_sequences(s, tokens, mha=True)})
    return pd.DataFrame(rows)


def wall_words(cfg, name: str, tokens: int) -> str:
    group = cfg.n_heads // max(cfg.n_kv_heads, 1)
    gqa = (f"{name} caches {cfg.n_kv_heads} KV heads for {cfg.n_heads} query heads (grouped-query attention): each "
           f"sequence's cache is {group}x smaller than with one KV head per query head, so a card holds about {group}x "
           "as many sequences — batch capacity, not only fewer bytes per step." if group > 1 else
           f"{name} has one KV head per query head (no grouped-query attention).")
    return (f"The most sequences of {tokens:,} tokens a card holds = (usable memory − weights) ÷ KV cache per "
            f"sequence ({cn.ESTIMATE}; this machine's memory as measured here). {gqa}")
