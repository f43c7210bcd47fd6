"""Words for the sweep, batch, roofline and budget labs: what each chart proves, in the story's terms.

Plain strings and small text builders (no Streamlit), so pages stay layout-only and texts are testable.
"""
from __future__ import annotations

import math

from engine.core.config import dtype_bytes
from engine.labs import repeats
from engine.labs.repeats import CpuWait, Effect, Repeated, effect_of
from engine.perfmodel.budget import BudgetResult
from ui.text import lesson_physics

SWEEP_INTRO = (
    "Every point below is **real runs measured now** on this machine, on the path a Run from Home takes (greedy "
    "decoding, end-of-text ignored so lengths are exact), repeated in rounds: each number is the median of its runs, "
    "with the fastest and slowest drawn around it. The **prompt sweep** widens the valley: once the prompt passes the "
    "device's ridge, TTFT grows with it — linearly for the weights' matmuls, plus a T² term from attention (below the "
    "ridge it stays nearly flat: the pass waits on reading the weights). The **output sweep** lengthens the bridge: each extra token "
    "costs one more step, and each step a little more than the last, because it reads a KV cache one entry longer."
)


def decode_context_text(cfg, dtype_name: str, contexts: list[int], model: str = "") -> str:
    """What the decode-step chart shows, with the bytes behind it computed from the model's shapes: each step reads
    all weights and the whole KV cache, so its cost grows linearly with the context (slowly while the cache is small
    next to the weights). `contexts`: the context lengths the chart's steps covered."""
    nbytes = dtype_bytes(dtype_name)
    window = lesson_physics.cache_sentence(cfg, nbytes, dtype_name, cfg.max_seq_len, model)
    text = ("**A decode step reads every weight once and the whole KV cache**, which gains one entry per token: its "
            f"cost grows linearly with the context. {window}.")
    if contexts and max(contexts) > min(contexts):
        lo = lesson_physics.cache_and_weights(cfg, nbytes, min(contexts))
        hi = lesson_physics.cache_and_weights(cfg, nbytes, max(contexts))
        grow = (hi.weight_bytes + hi.kv_bytes) / (lo.weight_bytes + lo.kv_bytes)
        text += (f" Across this chart ({min(contexts):,} → {max(contexts):,} tokens) a step reads ×{grow:.2f} the "
                 "bytes (estimate: weights + cache, each read once), so a step bound by bytes alone would slow by about "
                 "that much; attention's arithmetic and per-step overheads add to it or hide it. The bridge is paid "
                 "**per crossing**, and each crossing costs more as the context grows.")
    return text


CANCEL_HELP = "Stops after the run being measured; every run measured so far is kept."
ROUNDS_HELP = ("Each round measures every point once; each point shows the median of its rounds, and a verdict needs at "
               "least 3 rounds that agree by more than they lie apart. More rounds: slower, and harder to fool.")

BATCH_INTRO = (
    "B prompts of equal length run **together**: one batched prefill, then batched decode steps (greedy, measured "
    "now, every batch size on the same decode path, repeated in rounds). A decode step reads the weights once for the "
    "whole batch (and each sequence's own KV cache), so while decode is memory-bound and the weights dominate its "
    "bytes, B sequences cost little more than one and its throughput can grow almost B×. Prefill already works on "
    "many tokens at once, so extra sequences help it only until its matrix products keep the machine busy. What this "
    "machine did is written below the charts, from the measured points."
)
LEVEL_OFF = 1.15  # a doubling of B that adds less than 15 % tokens/s counts as levelled off


def _per_doubling(pair_a: tuple[int, float], pair_b: tuple[int, float]) -> float:
    """Growth of tokens/s per doubling of B between two measured points."""
    (ba, ra), (bb, rb) = pair_a, pair_b
    return (rb / ra) ** (1 / math.log2(bb / ba)) if bb > ba and ra > 0 else float("nan")


def _growth(pairs: list[tuple[int, float]], name: str, rounds: str = "") -> str:
    """How one phase's tokens/s moved with B, in words generated from the measured (B, tokens/s) pairs (medians);
    `rounds`: the same growth in each round, in words."""
    (b0, r0), (b1, r1) = pairs[0], pairs[-1]
    text = (f"**{name}**: {r0:,.0f} → {r1:,.0f} tokens/s from B = {b0} to B = {b1} (×{r1 / r0:.1f}; ideal "
            f"×{b1 / b0:g}{rounds})")
    if r1 / r0 < LEVEL_OFF:
        return text + ": flat — more sequences gave it nothing."
    flat_from = len(pairs) - 1  # the first point after which every doubling adds less than LEVEL_OFF
    while flat_from > 0 and _per_doubling(pairs[flat_from - 1], pairs[flat_from]) < LEVEL_OFF:
        flat_from -= 1
    if flat_from < len(pairs) - 1:
        return (text + f": it levels off from B = {pairs[flat_from][0]} (less than +{LEVEL_OFF - 1:.0%} per doubling "
                "after it).")
    (bl, rl) = pairs[-2]
    return text + (f": still growing at the largest batch measured (×{r1 / rl:.2f} from B = {bl} to {b1}) — "
                   "it has not levelled off here.")


def _rounds(values: list[float]) -> str:
    """', rounds ×a–×b' for a growth measured in several rounds, else ''."""
    r = Repeated.of(values)
    return f"; the rounds ×{r.low:.1f}–×{r.high:.1f}" if r.n >= 2 else ""


def gains(points) -> tuple[list[float], list[float]]:
    """Each round's growth of prefill and of decode tokens/s from the smallest to the largest batch measured."""
    pts = sorted(points, key=lambda p: p.batch_size)
    first, last = pts[0], pts[-1]
    pre = [b / a for a, b in zip(first.prefill_rates(), last.prefill_rates())]
    dec = [b / a for a, b in zip(first.decode_rates(), last.decode_rates())]
    return pre, dec


def batch_verdict(points) -> Effect:
    """Which segment batching paid more: per round, the bridge's growth ÷ the valley's (> 1: the bridge's more)."""
    pre, dec = gains(points)
    return effect_of(dec, pre)


def verdict_words(effect: Effect, more: str, less: str, what: str) -> str:
    """The sentence for a paired effect: `more` when it is clearly above ×1, `less` below, and the machine too busy to
    tell (or too few rounds) otherwise. `what` names the ratio, e.g. "the bridge's gain over the valley's"."""
    kind, n = effect.verdict, len(effect.measured)
    if kind == repeats.FASTER:
        return more
    if kind == repeats.SLOWER:
        return less
    if kind == repeats.FEW:
        return (f"Measured in {n} round{'s' if n != 1 else ''}: a verdict needs at least {repeats.MIN_REPEATS}, so the "
                "spread between rounds can tell an effect from a busy machine.")
    lo, hi = min(effect.measured), max(effect.measured)
    return (f"**The machine was too busy to tell**: over {n} rounds {what} was ×{lo:.2f} to ×{hi:.2f}, a spread of "
            f"{effect.spread:.0%}, larger than the weakest round's effect (×{effect.weakest:.2f}). No verdict: "
            "measure again when the machine is quieter, or with more rounds.")


def batch_findings(points) -> str:
    """What the measured batch sweep shows, generated from its points (engine.labs.sweeps.SweepPoint): each phase's
    growth (medians), and which gained more only where every round agrees by more than the rounds' spread."""
    pts = sorted((p for p in points if p.batch_size >= 1), key=lambda p: p.batch_size)
    if len(pts) < 2:
        return "Measure at least two batch sizes to compare how each phase's throughput grows."
    lines = []
    pre = [(p.batch_size, p.prefill_tokens_per_s) for p in pts if math.isfinite(p.prefill_tokens_per_s)]
    dec = [(p.batch_size, p.decode_tokens_per_s) for p in pts if math.isfinite(p.decode_tokens_per_s)]
    pre_rounds, dec_rounds = gains(pts)
    if len(pre) >= 2:
        lines.append(_growth(pre, "Prefill (the valley)", _rounds(pre_rounds)))
    if len(dec) >= 2:
        lines.append(_growth(dec, "Decode (the bridge)", _rounds(dec_rounds)))
    if len(pre) >= 2 and len(dec) >= 2:
        gp, gd = pre[-1][1] / pre[0][1], dec[-1][1] / dec[0][1]
        effect = batch_verdict(pts)
        rounds = len(effect.measured)
        more = (f"Batching paid the bridge more than the valley here (×{gd:.1f} vs ×{gp:.1f}, in each of {rounds} "
                "rounds by more than the rounds lie apart): one read of the weights served every sequence in a decode "
                f"step, while each prefill already shared one read of the weights among its {pts[0].prompt_tokens} "
                "prompt tokens.")
        less = (f"Here batching paid the valley more than the bridge (×{gp:.1f} vs ×{gd:.1f}, in each of {rounds} "
                "rounds by more than the rounds lie apart): at this prompt length a single prompt did not keep the "
                "machine's matrix units busy, and the decode steps slowed as B grew (the step latency below shows by how "
                "much: the batch's arithmetic and each sequence's own work, once past the ridge).")
        lines.append(verdict_words(effect, more, less, "the bridge's gain divided by the valley's"))
    return "\n\n".join(lines)


def path_note(points, separate) -> str:
    """Which decode path the batch sweep's points ran, and the fused batch-1 point kept apart."""
    paths = sorted({p.decode_path for p in points if p.decode_path})
    if not paths:
        return ""
    text = (f"Every batch size ran the same decode path, the **{paths[0]}**, so the points compare batch sizes, not "
            "programs." if len(paths) == 1 else f"The points ran different decode paths ({', '.join(paths)}).")
    for f in separate:
        loop = next((p for p in points if p.batch_size == f.batch_size), None)
        versus = (f" against {loop.itl_p50_s * 1e3:,.1f} ms on the loop" if loop is not None else "")
        text += (f" A Run at batch {f.batch_size} takes the **{f.decode_path}** instead: {f.itl_p50_s * 1e3:,.1f} ms a "
                 f"step (median){versus}. It is drawn apart (◆) and left out of the comparison: that step serves one "
                 "sequence only, so it is another program, not another batch size.")
    return text


def cpu_wait_words(wait: CpuWait | None) -> str:
    """One sentence: how long the lab's runs waited for a CPU, measured as Home's Run measures it, or why unknown."""
    if wait is None or not wait.runs:
        return ""
    if not wait.measured:
        return f"CPU wait: not measured ({wait.note}); other programs may have stretched these timings."
    return (f"The runs waited {wait.waited_s * 1e3:,.0f} ms for a CPU in {wait.timed_s:,.1f} s of timed work "
            f"({wait.share:.0%}; Linux schedstat, the longest-waiting thread of each interval, as Home states a Run's): "
            "stated beside the timings, never subtracted.")


def busy_banner(wait: CpuWait | None) -> str | None:
    """The busy-machine banner, when the lab's runs waited for a CPU a large share of their time; else None."""
    if wait is None or not wait.busy:
        return None
    return (f"**This machine was busy while the lab measured**: the engine's threads waited for a CPU {wait.share:.0%} "
            "of their timed work (other programs held the cores: a browser, a video call, other users). The timings "
            "are stretched and move from round to round; verdicts are held back where the rounds disagree.")


def batch_explanation(measured: int | None, predicted: int | None, ridge: float | None, tried_max: int,
                      bytes_per_weight: int) -> str:
    per = {4: "½·B", 2: "B", 1: "2·B"}.get(bytes_per_weight, f"2·B/{bytes_per_weight}")
    lines = [f"**Arithmetic intensity of a decode step** ≈ 2·params·B FLOPs ÷ (params·{bytes_per_weight} bytes "
             f"+ KV bytes) ≈ **{per} FLOP per byte**: it grows with the batch."]
    if ridge is not None:
        lines.append(f"This machine's **ridge point** (measured matmul FLOP/s ÷ measured copy bandwidth) is "
                     f"**{ridge:.1f} FLOP/byte**: below it a step waits on memory, above it on arithmetic.")
    if predicted is not None:
        lines.append(f"**Predicted crossover (estimate):** B ≈ {predicted}, where decode intensity reaches the ridge.")
    elif ridge is not None:
        lines.append("**Predicted crossover (estimate):** none — the KV cache grows with B as fast as the FLOPs do.")
    if measured is not None:
        lines.append(f"**Measured crossover:** B = {measured}, the first batch whose step takes more than 1.5× the "
                     "smallest batch's (in every round by more than the rounds lie apart, when measured in rounds): past it each "
                     "rider's own work (arithmetic, its KV cache) sets the pace, compute-bound where B has reached the ridge.")
    else:
        lines.append(f"**Measured crossover:** not shown up to B = {tried_max} — no batch's step took more than 1.5× "
                     "the smallest batch's (in every round by more than the rounds lie apart, when measured in rounds).")
    lines.append("On most CPUs the ridge is low (a few to a few dozen FLOP/byte on their vector units), so decode turns "
                 "compute-bound at a small B; "
                 f"the GPU presets of the Roofline page run {lesson_physics.ridge_range_words()} in 16-bit, so "
                 "there a decode step stays memory-bound, and batching nearly free per step, for far larger batches.")
    return "\n\n".join(lines)


MEASURED_NOTE = (
    "The two dots are **measured**: FLOPs and bytes come from the formulas for this model and shape, divided by "
    "the time measured for the prefill pass and for the median decode step. The roof comes from this machine's "
    "measured peaks (a 256 MiB tensor copy; a matmul at the model's MLP shapes)."
)

BUDGET_INTRO = (
    "Old Qin has money for faster horses (prefill speed-ups: more FLOP/s for a prompt past the ridge, better kernels, "
    "prefix caching) and for a better bridge (decode speed-ups at a small batch: more bandwidth, fewer bytes per "
    "weight, speculative decoding). Each only "
    "shortens its own segment of one journey. (Batching is the other kind of money: it carries more riders per "
    "crossing — throughput — and makes no single journey shorter.) **Amdahl's law:** new time = p / s_prefill + "
    "(1 − p) / s_decode, with p the valley's share."
)


def budget_text(r: BudgetResult) -> str:
    return (f"Prefill share p = **{r.prefill_share:.0%}**. New time = {r.prefill_share:.2f} / {r.prefill_speedup:g} + "
            f"{1 - r.prefill_share:.2f} / {r.decode_speedup:g} = {r.new_prefill:.3f} + {r.new_decode:.3f} = "
            f"**{r.new_time:.3f}** of the original: **{r.saving:.0%} saved** ({r.speedup:.2f}× end to end). "
            f"Even an infinitely fast valley could give at most {r.limit_if_only_prefill:.2f}×.")


def fable_text(results: dict[str, BudgetResult]) -> str:
    lines = ["**The fable's numbers** (the valley of Longmen Bay is 20% of the journey, p = 0.2):"]
    for name, r in results.items():
        lines.append(f"- {name}: 1 − ({r.new_prefill:.2f} + {r.new_decode:.2f}) = **{r.saving:.0%} saved**")
    lines.append("")  # a paragraph of its own, not glued to the last bullet
    lines.append("Doubling only the valley saves a tenth: the horsepower is spent where the journey isn't. "
                 "Put money on the bridge too and the same journey is 40% shorter (doubling only the bridge "
                 "would already save 1 − (0.2 + 0.4) = 40%).")
    return "\n".join(lines)
