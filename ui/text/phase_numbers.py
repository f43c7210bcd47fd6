"""The numbers behind the two bends: prefill FLOPs (an estimate, with its formula) and KV-cache bytes.

Streamlit-free. Everything here is read from a Trace (measured) or computed from a stated formula
(estimate); the text builders say which is which. FLOP counting follows Kaplan et al. 2020 (2 FLOPs
per parameter per token for the matrix products) plus the attention scores and weighted sums.
"""
from __future__ import annotations

import html
import math
import unicodedata
from dataclasses import dataclass

from engine.core.config import ModelConfig, dtype_bytes
from engine.perfmodel.flops import PREFILL_FORMULA as PREFILL_FORMULA
from engine.perfmodel.flops import PrefillFlops, prefill_flops

VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible_piece(piece: str, max_chars: int = 8) -> str:
    """One token's text made readable as an axis label: whitespace shown, control chars marked, truncated."""
    if piece == "":
        return "∅"
    shown = "".join(VISIBLE_WHITESPACE.get(ch, "⍰" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch)
                    for ch in piece)
    return shown if len(shown) <= max_chars else shown[: max_chars - 1] + "…"


def plot_label(piece: str, max_chars: int = 8) -> str:
    """`visible_piece` for Plotly text (ticks, hovers): Plotly reads a few HTML tags and entities, so the
    token's own <, > and & are escaped: a token is always shown as text, never as markup."""
    return html.escape(visible_piece(piece, max_chars), quote=False)


def tick_labels(pieces: list[str], max_labels: int = 40, start: int = 0) -> tuple[list[int], list[str]]:
    """Tick positions and texts for token axes: every k-th token so at most `max_labels` are shown."""
    every = max(1, math.ceil(len(pieces) / max_labels))
    positions = list(range(0, len(pieces), every))
    return [start + i for i in positions], [plot_label(pieces[i]) for i in positions]


def prefill_flops_of(trace) -> PrefillFlops:
    """Estimated FLOPs of the trace's prefill pass (engine.perfmodel.flops, the one formula every page uses)."""
    return prefill_flops(trace.model_config, trace.n_prompt, trace.batch_size)


def si(value: float, unit: str) -> str:
    """1.23e9 FLOP -> '1.23 GFLOP' (powers of 1000)."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def binary_bytes(n: float) -> str:
    """4,469,760 -> '4.26 MiB' (powers of 1024, like memory)."""
    for factor, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n / factor:.2f} {name}"
    return f"{int(n)} B"


def bytes_per_number(dtype_name: str) -> int:
    """4 for float32, 2 for bfloat16 / float16: the bytes one weight or cache entry takes."""
    return dtype_bytes(dtype_name)


def kv_formula_text(cfg: ModelConfig, dtype_name: str) -> str:
    """'2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 B (float32) = 46,080 B per token'."""
    nbytes = dtype_bytes(dtype_name)
    return (f"2 (K and V) × {cfg.n_layers} layers × {cfg.n_kv_heads} KV heads × {cfg.head_dim} dims × "
            f"{nbytes} B ({dtype_name}) = {cfg.kv_bytes_per_token(nbytes):,} B per token")


def kv_counter_text(bytes_per_token: int, n_tokens: int, batch: int = 1) -> str:
    """'46,080 B/token × 97 tokens = 4,469,760 B (4.26 MiB)'."""
    total = bytes_per_token * n_tokens * batch
    seqs = f" × {batch} sequences" if batch > 1 else ""
    return f"{bytes_per_token:,} B/token × {n_tokens} tokens{seqs} = {total:,} B ({binary_bytes(total)})"


@dataclass(frozen=True)
class DecodeView:
    """What the bridge page shows at position p (0 = the first token, made by prefill; p ≥ 1 = decode step p−1)."""
    position: int
    n_positions: int  # 1 + number of decode steps
    phase: str  # "prefill" or "decode"
    text_before: str  # generated text before the new token
    new_token: str  # the token produced at this position
    input_token: str  # the token fed in (last prompt token for p = 0)
    kv_tokens: int  # tokens in the cache that this step attended over (T + p)
    kv_bytes: int  # bytes of the cache after this step (measured from the cache object)
    seconds: float  # measured: TTFT for p = 0, this step's latency otherwise
    bytes_read: int  # estimate: weights + KV cache read by this step
    riders: int = 1  # sequences that shared this decode step (continuous batching)


def decode_view(trace, position: int) -> DecodeView:
    """Collect the numbers for one position of the step-through; position is clamped into range."""
    n_positions = len(trace.steps) + 1
    p = max(0, min(int(position), n_positions - 1))
    pieces = list(trace.output_tokens)
    T = trace.n_prompt
    riders = 1
    if p == 0:
        kv_tokens, seconds = T, trace.prefill_seconds
        kv_bytes = T * trace.kv_bytes_per_token * trace.batch_size
        input_token = trace.prompt_tokens[-1] if trace.prompt_tokens else ""
    else:
        step = trace.steps[p - 1]
        kv_tokens, seconds, kv_bytes, riders = step.kv_length, step.seconds, step.kv_bytes, step.riders
        input_token = pieces[p - 1] if p - 1 < len(pieces) else ""
    return DecodeView(
        position=p, n_positions=n_positions, phase="prefill" if p == 0 else "decode",
        text_before="".join(pieces[:p]), new_token=pieces[p] if p < len(pieces) else "",
        input_token=input_token, kv_tokens=kv_tokens, kv_bytes=kv_bytes, seconds=seconds,
        bytes_read=trace.weight_bytes + kv_bytes, riders=riders,
    )


def bandwidth_text(view: DecodeView) -> str:
    """Estimated bytes this step moved and the bandwidth that implies (estimate: weights + cache read once)."""
    if view.seconds <= 0:
        return ""
    rate = view.bytes_read / view.seconds
    return (f"≈ {binary_bytes(view.bytes_read)} read (all weights + the whole cache, estimate) in "
            f"{view.seconds * 1000:.1f} ms → ≈ {si(rate, 'B/s')}")


MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|<>~:$&=")


def escape_markdown(text: str) -> str:
    """Model or user text made inert for st.markdown: punctuation backslash-escaped, newlines shown as ↵."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("↵  \n")
        elif ch in MARKDOWN_SPECIAL:
            out.append("\\" + ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            out.append("⍰")
        else:
            out.append(ch)
    return "".join(out)


def highlighted_text_markdown(view: DecodeView) -> str:
    """The generated text so far with the new token on a blue background (all model text escaped)."""
    new = escape_markdown(visible_piece(view.new_token, max_chars=40))
    return f"{escape_markdown(view.text_before)}:blue-background[**{new}**]"


def step_sentence(view: DecodeView) -> str:
    """'Token 4 of 32, made by decode step 3: fed “␣at”, looking over 67 cached tokens.' (markdown, escaped)."""
    if view.phase == "prefill":
        how = "**prefill** (all prompt tokens in one pass)"
    else:
        how = f"**decode step {view.position}**: fed “{escape_markdown(visible_piece(view.input_token, 20))}”"
    shared = (f" The step was shared by **{view.riders} riders on the bridge** (other requests' sequences decoding "
              "in the same pass)." if view.riders > 1 else "")
    return (f"Token {view.position + 1} of {view.n_positions}, made by {how}, looking over {view.kv_tokens} cached tokens."
            + shared)
