"""Old Qin's indicator lights as an experiment, in numbers and words: each remedy's end-to-end speed-up on a valley-heavy
and on a bridge-heavy request (engine/labs/crossed_remedies.py), Amdahl's prediction from the measured share and phase
speed-ups beside it, and a story generated from the verdicts, never from the fable.

Streamlit-free. Every speed-up is paired by round (baseline and remedy of the same round) and gets a verdict only where
every round agrees by more than the rounds lie apart (engine/labs/repeats.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from engine.labs import repeats
from engine.labs.crossed_remedies import BASELINE
from engine.labs.repeats import Effect, Repeated, add_waits
from engine.labs.timed_request import cpu_wait_of_timings
from ui.text.lab_text import busy_banner, cpu_wait_words

INTRO = ("The fable says money poured into the valley does nothing for the bridge. Here each remedy is measured on two "
         "requests on this machine: a **valley-heavy** one (a long prompt, a few tokens out) and a **bridge-heavy** one "
         "(a short prompt, many tokens out). The baseline is the engine's eager decode loop with full prefills; each "
         "round runs every configuration on both requests, and a verdict needs every round to agree by more than the "
         "rounds lie apart. Which remedies are real on this machine is measured too: the words below follow the "
         "measurements.")
PHASE = {"prefill": "valley", "decode": "bridge"}


@dataclass(frozen=True)
class Cell:
    remedy: str  # key
    label: str
    meant_for: str  # "prefill" or "decode"
    request: str
    total: Effect  # end-to-end: baseline time / remedy time, one per round
    ttft: Effect
    tpot: Effect
    share: float  # the baseline's prefill share of this request (median)

    @property
    def amdahl(self) -> float:
        """End-to-end speed-up Amdahl's law gives from the share and the measured phase speed-ups (medians)."""
        p, sp, sd = self.share, self.ttft.median, self.tpot.median
        return 1 / (p / sp + (1 - p) / sd) if sp > 0 and sd > 0 else float("nan")


def _ratios(base, alt, what) -> Effect:
    return repeats.effect_of([what(t) for t in base], [what(t) for t in alt])


def cells(result) -> list[Cell]:
    """One Cell per (remedy, request) measured."""
    out = []
    for key, (label, meant) in result.remedies.items():
        for request in result.requests:
            base, alt = result.runs(request, BASELINE), result.runs(request, key)
            if not base or not alt:
                continue
            share = Repeated.of([t.ttft_s / t.total_s for t in base]).median
            out.append(Cell(key, label, meant, request, _ratios(base, alt, lambda t: t.total_s),
                            _ratios(base, alt, lambda t: t.ttft_s), _ratios(base, alt, lambda t: t.tpot_s), share))
    return out


def effect_words(e: Effect) -> str:
    """'▲ ×1.83', '● ×1.02 (no change beyond the rounds' spread)', '○ ×1.40 (too few rounds)'."""
    kind = e.verdict
    return {repeats.FASTER: f"▲ ×{e.median:.2f} faster", repeats.SLOWER: f"▼ ×{e.median:.2f} slower",
            repeats.NOISE: f"● ×{e.median:.2f}, no change beyond the rounds' spread",
            repeats.FEW: f"○ ×{e.median:.2f} (too few rounds for a verdict)"}.get(kind, "not measured")


def light(e: Effect) -> float:
    """An indicator light's colour value on [-1, 1]: 0 (grey) without a verdict (not measured, too few rounds, too close
    to tell); with one, log2 of the median speed-up, at least ±0.25 so a measured effect is never painted as grey,
    -1 = 2x slower (red)."""
    kind = e.verdict
    if kind not in (repeats.FASTER, repeats.SLOWER):
        return 0.0
    z = math.log2(e.median)
    return max(0.25, min(1.0, z)) if kind == repeats.FASTER else min(-0.25, max(-1.0, z))


def table(result) -> pd.DataFrame:
    rows = [{"remedy": c.label, "meant for": PHASE[c.meant_for], "request": c.request,
             "prefill share (baseline)": round(c.share * 100, 1), "end to end": effect_words(c.total),
             "TTFT": effect_words(c.ttft), "TPOT": effect_words(c.tpot),
             "Amdahl from the phases": round(c.amdahl, 2), "rounds": len(c.total.measured)} for c in cells(result)]
    return pd.DataFrame(rows)


def _helped(c: Cell) -> bool:
    return c.total.verdict == repeats.FASTER


def story(result) -> str:
    """What the crossed measurement says, remedy by remedy, then the lesson where the data bear it out."""
    by_remedy: dict[str, list[Cell]] = {}
    for c in cells(result):
        by_remedy.setdefault(c.remedy, []).append(c)
    lines = []
    for key, cs in by_remedy.items():
        label, meant = result.remedies[key]
        own = "valley-heavy" if meant == "prefill" else "bridge-heavy"
        mine = next((c for c in cs if c.request == own), None)
        other = next((c for c in cs if c.request != own), None)
        if mine is None or other is None:
            continue
        phase = mine.ttft if meant == "prefill" else mine.tpot
        text = (f"**{label}** (for the {PHASE[meant]}): its own phase {effect_words(phase)}; end to end "
                f"{effect_words(mine.total)} on the {own} request (Amdahl from the measured share "
                f"{mine.share:.0%} and phase speed-ups: ×{mine.amdahl:.2f}), {effect_words(other.total)} on the "
                f"{other.request} one (×{other.amdahl:.2f} by Amdahl, prefill share {other.share:.0%}).")
        if phase.verdict == repeats.SLOWER:
            text += (f" It made the {PHASE[meant]} slower in every round, so it is no remedy on this machine: a remedy "
                     "must be measured where it is to be bought.")
        elif phase.verdict == repeats.NOISE:
            text += (f" Its rounds lie further apart than its effect on the {PHASE[meant]}: the machine was too busy to "
                     "tell whether it is a remedy here. Measure again when it is quieter.")
        elif phase.verdict == repeats.FEW:
            text += f" Too few rounds to tell whether it is a remedy here (a verdict needs {repeats.MIN_REPEATS})."
        elif _helped(mine) and not _helped(other):
            text += f" Real here, and it paid only where the {PHASE[meant]} was the journey."
        elif _helped(mine) and _helped(other):
            if mine.total.median > other.total.median:
                text += (f" It shortened both journeys, more where the {PHASE[meant]} was the journey: each pays in "
                         "proportion to its segment's share.")
            else:  # Amdahl says the opposite: the remedy also sped up the other segment, or the rounds were unequal
                text += (f" It shortened both journeys, but no more where the {PHASE[meant]} was the journey: it also "
                         "sped up the other segment here (see its TTFT and TPOT), so its gain is not its own segment's "
                         "share alone.")
        lines.append(text)
    if skipped := getattr(result, "skipped", {}):
        lines.append("Not measured here: " + "; ".join(f"{k}: {why}" for k, why in skipped.items()) + ".")
    wait = add_waits(cpu_wait_of_timings(ts) for ts in result.timings.values())
    lines.append(_waits(wait))
    return "\n\n".join(line for line in lines if line)


def _waits(wait) -> str:
    return " ".join(x for x in (busy_banner(wait) or "", cpu_wait_words(wait)) if x)


def matrix(result) -> tuple[list[str], list[str], list[list[float]], list[list[str]]]:
    """The lights: rows (remedies, labelled with their segment), columns (requests), colour values on [-1, 1] (0 grey
    without a verdict) and each cell's words."""
    cs = cells(result)
    rows = list(dict.fromkeys(f"{c.label} [{PHASE[c.meant_for]}]" for c in cs))
    cols = list(result.requests)
    z = [[0.0] * len(cols) for _ in rows]
    text = [["not measured"] * len(cols) for _ in rows]
    for c in cs:
        i, j = rows.index(f"{c.label} [{PHASE[c.meant_for]}]"), cols.index(c.request)
        z[i][j] = light(c.total)
        text[i][j] = effect_words(c.total).split(",")[0]
    return rows, cols, z, text
