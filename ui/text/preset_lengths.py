"""One-click requests that show each verdict (prefill-heavy, decode-heavy, close to even) on THIS machine.

The lengths are chosen from rates measured here (a quick probe: TTFT at a few prompt lengths and the decode step
time), so a fast GPU and a slow laptop get different presets that tell the same story. Streamlit-free.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ui.text.diagnosis import BALANCE_BAND, verdict_of

PROBE_OUTPUT = 8  # output tokens per probe run: 7 decode steps each, ~28 in all for the mean step time
PREFILL_TARGET, DECODE_TARGET = 0.85, 0.12  # aimed-at prefill shares, well outside the close-to-even band
# a stall of a shared machine the clear-cut presets must survive in the phase they make short: a CI run measured a
# tiny model's 2 ms prefill at 11 ms, 41 % of a 28 ms request, "close to even" from a decode-heavy preset
HICCUP_SECONDS = 0.010
EVEN_STEPS = 12  # the even preset aims at a prompt whose TTFT is about this many decode steps (fine-grained N)
SHORT_PROMPT = 16
PRESET_EXAMPLES = {"prefill": "summarisation", "even": "translation", "decode": "chat"}  # text of the right shape
PRESET_NAMES = {"prefill": "Prefill-heavy", "even": "Close to even", "decode": "Decode-heavy"}


@dataclass(frozen=True)
class Rates:
    """This machine's measured costs for one model: TTFT at some prompt lengths, and one decode step."""
    points: tuple[tuple[int, float], ...]  # (prompt tokens, TTFT seconds), sorted by length
    tpot_s: float  # mean decode step
    model: str

    def ttft(self, tokens: int) -> float:
        """TTFT at `tokens`: interpolated between measured lengths, extrapolated from the last two beyond them."""
        pts = self.points
        if len(pts) == 1:
            return pts[0][1] * tokens / pts[0][0]
        for (t0, y0), (t1, y1) in zip(pts, pts[1:]):
            if tokens <= t1 or (t1, y1) == pts[-1]:
                return max(y0 + (y1 - y0) * (tokens - t0) / (t1 - t0), 1e-6)
        return pts[-1][1]


@dataclass(frozen=True)
class Preset:
    verdict: str  # "prefill", "decode" or "even"
    prompt_tokens: int
    output_tokens: int
    predicted_share: float  # prefill share predicted from the measured rates
    example: str  # key of the example prompt used

    @property
    def label(self) -> str:
        return f"{PRESET_NAMES[self.verdict]} ({self.prompt_tokens:,} → {self.output_tokens})"


def probe_lengths(max_prompt: int) -> list[int]:
    """Prompt lengths of the quick probe: short (twice: a session's first request can pay a cold start), a quarter
    and the longest the presets may use. The fastest run of each length counts."""
    return [SHORT_PROMPT] + sorted({SHORT_PROMPT, max(SHORT_PROMPT, max_prompt // 4), max_prompt})


def rates_from_traces(traces) -> Rates | None:
    """Rates from a few measured runs (engine Traces of one model); None when they measured nothing usable.

    The decode step is the mean of the runs' steps, not their median: a request's decode time is the sum of its
    steps, and a busy machine's steps have a long tail (measured: docs/teacher-guide.md, "When this machine's numbers
    differ")."""
    runs = [t for t in traces if t.prefill_seconds > 0]
    steps = [s.seconds for t in runs for s in t.steps if s.seconds > 0]
    if not runs or not steps:
        return None
    by_len: dict[int, float] = {}
    for t in runs:
        by_len[t.n_prompt] = min(by_len.get(t.n_prompt, math.inf), t.prefill_seconds)
    return Rates(tuple(sorted(by_len.items())), sum(steps) / len(steps), runs[0].model)


def share(rates: Rates, prompt_tokens: int, output_tokens: int, stall: str = "") -> float:
    """The predicted prefill share; `stall` 'prefill' or 'decode': with a `HICCUP_SECONDS` stall added to that
    phase (only where it has steps)."""
    prefill = rates.ttft(prompt_tokens) + (HICCUP_SECONDS if stall == "prefill" else 0.0)
    decode = max(output_tokens - 1, 0) * rates.tpot_s
    decode += HICCUP_SECONDS if stall == "decode" and decode > 0 else 0.0
    return prefill / (prefill + decode)


def choose(rates: Rates, max_prompt: int, max_output: int) -> dict[str, Preset]:
    """The three presets for these rates; max_prompt and max_output already fit the model's context."""
    def preset(verdict: str, t: int, n: int) -> Preset:
        return Preset(verdict, t, n, share(rates, t, n), PRESET_EXAMPLES[verdict])

    # prefill-heavy: the longest prompt, and as many output tokens as keep the valley's share above the target
    t_long = max_prompt
    n = 1
    while n < min(max_output, 32) and share(rates, t_long, n + 1, stall="decode") >= PREFILL_TARGET:
        n += 1
    presets = {"prefill": preset("prefill", t_long, n)}
    # close to even: a prompt whose TTFT is ~EVEN_STEPS decode steps, then as many steps as its TTFT
    candidates = range(SHORT_PROMPT, max_prompt + 1, 16)
    t_even = min(candidates, key=lambda t: abs(rates.ttft(t) - EVEN_STEPS * rates.tpot_s))
    n_even = int(min(max(round(rates.ttft(t_even) / rates.tpot_s) + 1, 2), max_output))
    presets["even"] = preset("even", t_even, n_even)
    # decode-heavy: a short prompt, and enough output tokens to push the valley's share under the target
    n = 2
    while n < max_output and share(rates, SHORT_PROMPT, n, stall="prefill") > DECODE_TARGET:
        n += 1
    presets["decode"] = preset("decode", SHORT_PROMPT, max(n, 16) if max_output >= 16 else n)
    return presets


def how_chosen(rates: Rates) -> str:
    """Where the presets' lengths come from, in measured numbers."""
    ttfts = ", ".join(f"{rates.ttft(t) * 1e3:,.0f} ms at {t:,}" for t, _ in rates.points)
    runs = f"{len(rates.points) + 1} short runs, the fastest of each length"
    band = f"{0.5 - BALANCE_BAND:.0%}–{0.5 + BALANCE_BAND:.0%}"
    return (f"Lengths chosen from this machine's measured rates ({rates.model}, a quick probe of {runs}): "
            f"TTFT {ttfts} prompt tokens; a decode step {rates.tpot_s * 1e3:,.1f} ms on average. Each preset aims well outside "
            f"the close-to-even band ({band} prefill) or in its middle; the run itself says what happened.")


def predicted_words(p: Preset) -> str:
    return f"predicted {p.predicted_share:.0%} prefill" if math.isfinite(p.predicted_share) else "no prediction"


def outcome(preset: Preset | None, summary, asked_tokens: int | None = None) -> str | None:
    """After a preset's run: what it aimed at and what was measured (None when the run is not the preset's).
    asked_tokens: the run's max_new_tokens (a run that asked for the preset's length is the preset's, even where the
    model ended its answer sooner: the line then says so)."""
    asked = summary.output_tokens if asked_tokens is None else asked_tokens
    if preset is None or (summary.prompt_tokens, asked) != (preset.prompt_tokens, preset.output_tokens):
        return None
    got = verdict_of(summary.prefill_share)
    said = {"prefill": "prefill-heavy", "decode": "decode-heavy", "even": "close to even"}
    hit = "as named" if got == preset.verdict else f"not {said[preset.verdict]} this time: run it again"
    short = ""
    if summary.output_tokens < preset.output_tokens:  # the end of its answer came first (it decides, not the preset)
        short = (f" The model ended its answer after {summary.output_tokens} of the {preset.output_tokens} tokens "
                 "(end of text), so decode ran fewer steps than planned.")
    return (f"Preset **{PRESET_NAMES[preset.verdict]}** ({preset.prompt_tokens:,} → {preset.output_tokens} tokens, "
            f"{predicted_words(preset)}): measured {summary.prefill_share:.0%} prefill, {said[got]} — {hit}.{short}")
