"""Old Qin's reading of the ledger: which segment held this request back, what helps it, what is wasted, and
what a shared server would do instead (batching, chunked prefill: the room's remedies, never this request's).

Built from an `engine.PhaseSummary` only (measured numbers), as plain text and Markdown with no user
text inside, so the page can render it safely. Streamlit-free.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# remedies that shorten THIS request's phase: (name, why it helps this phase). Batching and chunked prefill are not
# here: they are the server's (SERVER_REMEDIES) and lengthen this request's own TTFT.
PREFILL_REMEDIES = [
    ("More FLOP/s (a faster matmul engine)",
     "a long prompt's prefill is compute-bound (above the device's ridge point: each weight read serves every prompt "
     "token), so faster arithmetic shortens TTFT; a prompt too short to reach the ridge waits on memory instead"),
    ("Prefix caching", "a prompt prefix seen before (system prompt, earlier chat turns) is not computed again"),
    ("Quantised weights and activations (W8A8, FP8)",
     "on cards with int8 / fp8 tensor cores the matrix products themselves run faster; weight-only int8 or 4-bit "
     "leaves prefill's arithmetic as it was"),
]
DECODE_REMEDIES = [
    ("Fewer bytes per weight (int8 / 4-bit)", "each step reads every weight once: int8 reads 4x fewer bytes than "
                                              "float32, 2x fewer than bf16, so reading the weights takes less time, "
                                              "where the kernel turns them back into numbers as fast as it reads "
                                              "them (measure it: the Remedies lab)"),
    ("KV-cache layout and quantisation", "each step reads the whole KV cache, which grows with the context: fewer "
                                         "bytes per cached token, less traffic"),
    ("Speculative decoding", "several guessed tokens are checked in one pass, so fewer serial trips across the "
                             "bridge: it pays while the step is memory-bound (checking k tokens costs about as much as "
                             "one) and most guesses are accepted; otherwise the extra arithmetic costs more than it saves"),
    ("CUDA graphs / fewer launch gaps", "cut the host's time issuing kernels between one token and the next: the step's "
                                        "whole cost for a small model on a GPU, a small part for a big one"),
]
# remedies of a shared server: they raise the room's throughput or even out its latencies, not this request's speed
SERVER_REMEDIES = [
    ("Batching requests", "one read of the weights serves every rider of a decode step, so the server's tokens/s grows; "
                          "this request's TTFT gets longer (it waits for, or shares, other requests' passes) and its "
                          "TPOT no shorter (longer once each step carries more riders)"),
    ("Chunked prefill", "a long prompt is split over several steps so that riders already decoding are not stalled "
                        "behind it: it protects their ITL (the project measured the riders' worst gap 1444 → 519 ms on a "
                        "2-core CPU: a recording in its serving notes, not this session), while the chunked prompt's "
                        "own TTFT gets longer"),
]
# remedies that would be wasted on a request dominated by the OTHER phase
WASTED_ON_DECODE = [
    ("More FLOP/s, a bigger compute engine", "the bridge doesn't recognise horsepower: a decode step with few riders "
                                             "waits on bytes (a small model on a GPU, on kernel launches), not on "
                                             "arithmetic; only a batch large enough to pass the ridge would use it"),
    ("Prefix caching", "it shortens TTFT, which is already the small part of this request"),
]
WASTED_ON_PREFILL = [
    ("A faster decoder (quantised KV cache, speculative decoding, CUDA graphs)",
     "they speed up the bridge, but this request spends most of its time in the valley"),
    ("More memory bandwidth alone", "a prompt long enough to pass the device's ridge is limited by arithmetic, not "
                                    "by bytes (only a prompt too short to reach the ridge would gain)"),
]
BALANCE_BAND = 0.1  # a prefill share within 50% +/- 10 points is "close to even": headline and body both say so


@dataclass(frozen=True)
class Diagnosis:
    dominant: str  # "prefill" or "decode": the larger segment (even when the split is close to even)
    share: float  # the dominant phase's share of end-to-end time
    balanced: bool  # both phases within BALANCE_BAND of half
    headline: str
    details: str
    helps: list[tuple[str, str]]
    wasted: list[tuple[str, str]]
    max_gain_other: float  # fraction of time saved if the OTHER phase became instant (Amdahl bound)
    server: tuple[tuple[str, str], ...] = tuple(SERVER_REMEDIES)  # the server's remedies, never in `helps`

    @property
    def verdict(self) -> str:
        """The one verdict the headline, the body and the presets use: "prefill", "decode" or "even"."""
        return "even" if self.balanced else self.dominant

    def to_markdown(self) -> str:
        lines = [f"### {self.headline}", "", self.details, "", "**Remedies that help this request:**"]
        lines += [f"- **{name}** — {why}" for name, why in self.helps]
        lines += ["", "**Remedies that would be wasted here:**"]
        lines += [f"- ~~{name}~~ — {why}" for name, why in self.wasted]
        lines += ["", "**Remedies for a shared server** (they help the room, not this request):"]
        lines += [f"- *{name}* — {why}" for name, why in self.server]
        return "\n".join(lines)


def _ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:,.1f} ms"


def verdict_of(prefill_share: float) -> str:
    """"prefill", "decode" or "even" (within BALANCE_BAND of half) for a measured prefill share."""
    share = prefill_share if math.isfinite(prefill_share) else 0.0
    if abs(share - 0.5) <= BALANCE_BAND:
        return "even"
    return "prefill" if share > 0.5 else "decode"


def _ledger(summary) -> str:
    """Both segments in measured numbers, counted as the Decode page counts: prefill makes the first token, each
    decode step one more."""
    steps = max(summary.output_tokens - 1, 0)
    valley = (f"Prefill read the {summary.prompt_tokens}-token prompt in one pass and made the first token: TTFT "
              f"{_ms(summary.ttft_s)} ({summary.prefill_tokens_per_s:,.0f} prompt tokens/s).")
    if steps == 0:
        return valley + " There was no decode step: the request stopped after its first token."
    plural = "s" if steps > 1 else ""
    return (f"{valley} Decode made the other {steps} token{plural} one at a time, {steps} step{plural} in "
            f"{_ms(summary.decode_s)}: TPOT {_ms(summary.tpot_s)} per token.")


def diagnose(summary) -> Diagnosis:
    """Which phase held this request back (by measured share of end-to-end time), or close to even, and what to do."""
    share_prefill = summary.prefill_share if math.isfinite(summary.prefill_share) else 0.0
    dominant = "prefill" if share_prefill >= 0.5 else "decode"
    share = share_prefill if dominant == "prefill" else 1.0 - share_prefill
    balanced = verdict_of(share_prefill) == "even"
    other_share = 1.0 - share
    name = "Prefill" if dominant == "prefill" else "Decode"
    place = "the wide valley of Longmen Bay" if dominant == "prefill" else "the single-plank bridge"
    if balanced:
        headline = (f"Close to even: prefill {share_prefill:.0%}, decode {1 - share_prefill:.0%} of this request's "
                    f"{_ms(summary.total_s)} (within {BALANCE_BAND:.0%} of half each).")
        amdahl = (f"Neither segment holds this request back alone: making only {name.lower()} instant would save "
                  f"at most {share:.0%}, only the other at most {other_share:.0%}. Both sets of remedies pay off.")
        helps = PREFILL_REMEDIES + DECODE_REMEDIES
        wasted = [("Pouring the whole budget into one segment", "with a close-to-even split, each side alone caps "
                                                                "the gain near half")]
    else:
        headline = f"{name} dominates: {share:.0%} of this request's {_ms(summary.total_s)} was spent in {place}."
        amdahl = (f"Even if the other segment became instant, this request would finish at most {other_share:.0%} "
                  f"sooner (Amdahl): spend on {name.lower()} first.")
        helps, wasted = ((PREFILL_REMEDIES, WASTED_ON_PREFILL) if dominant == "prefill"
                         else (DECODE_REMEDIES, WASTED_ON_DECODE))
    return Diagnosis(dominant=dominant, share=share, balanced=balanced, headline=headline,
                     details=f"{_ledger(summary)} {amdahl}", helps=list(helps), wasted=list(wasted),
                     max_gain_other=other_share)


def sharing_markdown(sharing) -> str:
    """What sharing the bridge did, in this request's own numbers (an engine.core.metrics.BridgeSharing).

    The seed's point: batching is the bridge's remedy for THROUGHPUT (one read of the weights serves
    every rider), not for any one rider's latency."""
    if sharing is None or sharing.shared_steps == 0:
        return ""
    lines = [f"**Riders on the bridge.** {sharing.shared_steps} of this request's {sharing.steps} decode steps were "
             f"shared with other requests (up to {sharing.max_riders} riders, {sharing.mean_riders:.1f} on average)."]
    if math.isfinite(sharing.itl_alone_p50_s):
        change = sharing.itl_shared_p50_s / sharing.itl_alone_p50_s - 1
        alone_rate = 1 / sharing.itl_alone_p50_s
        lines.append(f"Your gap between tokens: {_ms(sharing.itl_shared_p50_s)} when shared vs "
                     f"{_ms(sharing.itl_alone_p50_s)} when you crossed alone ({change:+.0%}). Meanwhile the bridge "
                     f"carried {sharing.room_tokens_per_s:,.1f} tokens/s for the whole room, vs about {alone_rate:,.1f} "
                     f"tokens/s with one rider.")
    else:
        lines.append(f"Your median gap between tokens was {_ms(sharing.itl_shared_p50_s)}, while the bridge carried "
                     f"{sharing.room_tokens_per_s:,.1f} tokens/s for the whole room (no step of yours crossed alone: "
                     "run again when the room is quiet, or in queue mode, to compare).")
    if sharing.stall_s > 0:
        lines.append(f"Other requests' prefills held your tokens back {_ms(sharing.stall_s)} in all (grey in the "
                     "latency chart): a new rider's whole prompt crosses the valley between two of your steps.")
    lines.append("Batching is the bridge's remedy for **throughput** — one read of the weights serves every rider — "
                 "not for any one rider's latency.")
    return " ".join(lines)
