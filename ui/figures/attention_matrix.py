"""The numbers behind the attention pictures: a trace's captured weights as matrices and rows, pooled and coloured.

Streamlit-free and Plotly-free: `trace.attention` (AttentionCapture: for captured layer i, prefill[i] is (H, T, T)
and decode[i][s] is (H, T+s+1)) turned into the (T, T) prefill matrix, the (T+n, T+n) matrix with decode rows,
one query's row over its history, block averages for long sequences and linear or log colour values. The masked
upper triangle is NaN, so it stays blank instead of looking like "zero attention". Drawn by ui/figures/fig_attention.py.
"""
from __future__ import annotations

import math

import numpy as np

LOG_FLOOR = -4  # log colour scale: weights below 1e-4 share the lightest colour


def token_pieces(trace) -> list[str]:
    """Each prompt then output token's readable piece; "#i" where the trace has none (a recorded file may leave the
    pieces out), so labels always match the matrices' rows."""
    n_out = len(trace.output_ids)
    prompt = list(trace.prompt_tokens) if len(trace.prompt_tokens) == trace.n_prompt else \
        [f"#{i}" for i in range(trace.n_prompt)]
    output = list(trace.output_tokens) if len(trace.output_tokens) == n_out else \
        [f"#{trace.n_prompt + i}" for i in range(n_out)]
    return prompt + output


def colour_values(z: np.ndarray, scale: str) -> tuple[np.ndarray, float, float, dict]:
    """Values to draw, their range and colour-bar ticks: 'linear' weights, or 'log' (log10, floored at 1e-4)."""
    if scale == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            shown = np.log10(np.clip(z, 10.0 ** LOG_FLOOR, 1.0))  # NaN stays NaN
        ticks = list(range(LOG_FLOOR, 1))
        return shown, float(LOG_FLOOR), 0.0, dict(tickvals=ticks, ticktext=[f"{10.0 ** t:g}" for t in ticks])
    zmax = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
    return z, 0.0, zmax, {}


def head_select(probs: np.ndarray, head: int | None) -> np.ndarray:
    """(H, ...) -> (...) for one head, or the mean over heads when head is None (float32)."""
    probs = np.asarray(probs, dtype=np.float32)
    return probs.mean(axis=0) if head is None else probs[head]


def captured(trace, layer: int) -> tuple[np.ndarray, list]:
    """(prefill matrix (H, T, T), decode rows [(H, T+s+1)]) of model layer `layer`; KeyError if not captured."""
    i = trace.attention.index(layer) if trace.attention is not None else None
    if i is None:
        raise KeyError(f"layer {layer} was not captured for this run")
    return trace.attention.prefill[i], trace.attention.decode[i]


def prefill_matrix(trace, layer: int, head: int | None) -> np.ndarray:
    """(T, T) attention of the prompt on itself, NaN above the diagonal (positions a token cannot see)."""
    matrix = head_select(captured(trace, layer)[0], head).copy()  # (T, T)
    matrix[np.triu_indices_from(matrix, k=1)] = np.nan
    return matrix


def full_matrix(trace, layer: int, head: int | None) -> np.ndarray:
    """(T+n, T+n): prefill rows, then one row per decode step (row T+s has T+s+1 entries); NaN elsewhere."""
    rows = captured(trace, layer)[1]
    T, n = trace.n_prompt, len(rows)
    matrix = np.full((T + n, T + n), np.nan, dtype=np.float32)
    matrix[:T, :T] = prefill_matrix(trace, layer, head)
    for s, step_row in enumerate(rows):
        row = head_select(step_row, head)  # (T+s+1,)
        matrix[T + s, : row.shape[0]] = row
    return matrix


def block_size(n: int, max_side: int) -> int:
    return max(1, math.ceil(n / max_side))


def pool(matrix: np.ndarray, block: int, row_block: int | None = None) -> np.ndarray:
    """Average blocks of `row_block`×`block` cells (square by default), ignoring NaN (masked) cells; all-NaN blocks
    stay NaN."""
    rb = block if row_block is None else row_block
    if block == 1 and rb == 1:
        return matrix
    rows, cols = matrix.shape
    R, C = math.ceil(rows / rb), math.ceil(cols / block)
    padded = np.full((R * rb, C * block), np.nan, dtype=np.float32)
    padded[:rows, :cols] = matrix
    blocks = padded.reshape(R, rb, C, block)  # (R, rb, C, b)
    counts = np.sum(~np.isnan(blocks), axis=(1, 3))
    sums = np.nansum(blocks, axis=(1, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).astype(np.float32)


def history_row(trace, position: int, layer: int, head: int | None) -> np.ndarray:
    """Attention row of the token fed at step-through position p over its T+p keys.

    p = 0: the last prompt token's prefill row (it produced the first token); p ≥ 1: decode step p−1.
    """
    prefill, rows = captured(trace, layer)
    if position == 0:
        return head_select(prefill[:, -1, :], head)  # (T,)
    return head_select(rows[position - 1], head)  # (T+p,)
