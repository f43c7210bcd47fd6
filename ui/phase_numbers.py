"""The numbers behind the two bends: prefill FLOPs (an estimate, with its formula) and KV-cache bytes.

Streamlit-free. Everything here is read from a Trace (measured) or computed from a stated formula
(estimate); the text builders say which is which. FLOP counting follows Kaplan et al. 2020 (2 FLOPs
per parameter per token for the matrix products) plus the attention scores and weighted sums.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible_piece(piece: str, max_chars: int = 8) -> str:
    """One token's text made readable as an axis label: whitespace shown, control chars marked, truncated."""
    if piece == "":
        return "∅"
    shown = "".join(VISIBLE_WHITESPACE.get(ch, "⍰" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch)
                    for ch in piece)
    return shown if len(shown) <= max_chars else shown[: max_chars - 1] + "…"


def tick_labels(pieces: list[str], max_labels: int = 40, start: int = 0) -> tuple[list[int], list[str]]:
    """Tick positions and texts for token axes: every k-th token so at most `max_labels` are shown."""
    every = max(1, math.ceil(len(pieces) / max_labels))
    positions = list(range(0, len(pieces), every))
    return [start + i for i in positions], [visible_piece(pieces[i]) for i in positions]


@dataclass(frozen=True)
class TraceShapes:
    """Model shapes recovered from a trace alone (so a redraw never needs the model)."""
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    dtype_bytes: int


def shapes_from_trace(trace) -> TraceShapes:
    """Layers and KV heads from the cached-key norms, query heads from the attention, D from the byte count."""
    norms = trace.kv_key_norms  # (L, K, S)
    n_layers, n_kv_heads = int(norms.shape[0]), int(norms.shape[1])
    n_heads = int(trace.attention.prefill[0].shape[0]) if trace.attention and trace.attention.prefill else n_kv_heads
    dtype_bytes = DTYPE_BYTES.get(trace.dtype, 4)
    head_dim = trace.kv_bytes_per_token // (2 * n_layers * n_kv_heads * dtype_bytes)
    return TraceShapes(n_layers, n_heads, n_kv_heads, head_dim, dtype_bytes)


@dataclass(frozen=True)
class PrefillFlops:
    matmul: float  # 2 x (weights used per token) x T, plus the LM head once
    attention: float  # causal QK^T and A.V: 2 x L x T^2 x (H x D)
    formula: str  # the formula, in words and symbols, as shown on the page

    @property
    def total(self) -> float:
        return self.matmul + self.attention


def prefill_flops(n_params: int, n_layers: int, attn_width: int, n_tokens: int,
                  embedding_params: int | None = None, lm_head_params: int | None = None) -> PrefillFlops:
    """Estimated FLOPs of one prefill pass over T tokens.

    With embedding sizes known: the embedding lookup costs no FLOPs and the LM head runs for the
    last position only, so matmul = 2·(N − E)·T + 2·V·C. Without them: the simpler upper estimate
    2·N·T. Attention (causal, half of the T×T scores): 2 (QKᵀ and A·V) × 2 FLOPs × L × T²/2 × (H·D).
    """
    T = n_tokens
    attention = 2.0 * n_layers * T * T * attn_width
    if embedding_params is None or lm_head_params is None:
        matmul = 2.0 * n_params * T
        formula = "FLOPs ≈ 2·N·T + 2·L·T²·(H·D)   (N = all parameters, an upper estimate)"
    else:
        matmul = 2.0 * (n_params - embedding_params) * T + 2.0 * lm_head_params
        formula = "FLOPs ≈ 2·(N − E)·T + 2·V·C + 2·L·T²·(H·D)   (E = embedding parameters, LM head on the last token only)"
    return PrefillFlops(matmul, attention, formula)


def prefill_flops_for(trace, config=None) -> PrefillFlops:
    """Prefill FLOPs of a trace; pass the model's ModelConfig (same model) for the sharper estimate."""
    shapes = shapes_from_trace(trace)
    width = shapes.n_heads * shapes.head_dim
    if config is None:
        return prefill_flops(trace.n_params, shapes.n_layers, width, trace.n_prompt * trace.batch_size)
    vc = config.vocab_size * config.d_model
    embedding = vc * (1 if config.tie_embeddings else 2) + (config.max_seq_len * config.d_model if config.arch == "gpt2" else 0)
    T = trace.n_prompt
    one = prefill_flops(config.n_params, config.n_layers, width, T, embedding, vc)
    B = trace.batch_size
    return PrefillFlops(one.matmul * B, one.attention * B, one.formula + (f" × B={B}" if B > 1 else ""))


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


def kv_formula_text(shapes: TraceShapes, dtype_name: str) -> str:
    """'2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 B (float32) = 46,080 B per token'."""
    per_token = 2 * shapes.n_layers * shapes.n_kv_heads * shapes.head_dim * shapes.dtype_bytes
    return (f"2 (K and V) × {shapes.n_layers} layers × {shapes.n_kv_heads} KV heads × {shapes.head_dim} dims × "
            f"{shapes.dtype_bytes} B ({dtype_name}) = {per_token:,} B per token")


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


def decode_view(trace, position: int) -> DecodeView:
    """Collect the numbers for one position of the step-through; position is clamped into range."""
    n_positions = len(trace.steps) + 1
    p = max(0, min(int(position), n_positions - 1))
    pieces = list(trace.output_tokens)
    T = trace.n_prompt
    if p == 0:
        kv_tokens, seconds = T, trace.prefill_seconds
        kv_bytes = T * trace.kv_bytes_per_token * trace.batch_size
        input_token = trace.prompt_tokens[-1] if trace.prompt_tokens else ""
    else:
        step = trace.steps[p - 1]
        kv_tokens, seconds, kv_bytes = step.kv_length, step.seconds, step.kv_bytes
        input_token = pieces[p - 1] if p - 1 < len(pieces) else ""
    return DecodeView(
        position=p, n_positions=n_positions, phase="prefill" if p == 0 else "decode",
        text_before="".join(pieces[:p]), new_token=pieces[p] if p < len(pieces) else "",
        input_token=input_token, kv_tokens=kv_tokens, kv_bytes=kv_bytes, seconds=seconds,
        bytes_read=trace.weight_bytes + kv_bytes,
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
    return f"Token {view.position + 1} of {view.n_positions}, made by {how}, looking over {view.kv_tokens} cached tokens."
