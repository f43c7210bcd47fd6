"""Attention captures for the pictures: the prefill T x T matrix and each decode step's row, per layer.

Timed runs use the fused attention kernel, which never materialises probabilities. Afterwards ONE
forward pass over prompt + output (all but the last token, which was never fed back) with the
explicit softmax path gives both: prompt rows see only prompt tokens (causal), so the top-left
T x T block IS the prefill matrix, and row T+s is decode step s's row. Layers are converted to
float16 and handed over one at a time, so the transient stays one layer's scores; long runs keep
only the layers that fit a byte budget and fetch others on demand.
"""
from __future__ import annotations

import torch

from engine.core.kv_cache import KVCache
from engine.core.trace import AttentionCapture

BUDGET_BYTES = 8 * 2**20  # captures kept with a run by default (a default run's 30 layers take ~3.5 MB)


def capture_bytes(n_heads: int, n_prompt: int, n_output: int) -> int:
    """float16 bytes of ONE layer's capture: the (H, T, T) matrix plus N-1 rows of T+s+1 entries."""
    rows = sum(n_prompt + s + 1 for s in range(max(n_output - 1, 0)))
    return 2 * n_heads * (n_prompt * n_prompt + rows)


def layers_within_budget(cfg, n_prompt: int, n_output: int, budget: int = BUDGET_BYTES,
                         preferred: int | None = None) -> list[int]:
    """Every layer when they all fit `budget`; else evenly spaced ones that fit, always at least `preferred`."""
    per_layer = max(capture_bytes(cfg.n_heads, n_prompt, n_output), 1)
    fit = max(1, min(cfg.n_layers, budget // per_layer))
    if fit >= cfg.n_layers:
        return list(range(cfg.n_layers))
    if fit == 1:
        return [cfg.n_layers // 2 if preferred is None else preferred]
    spaced = {round(i * (cfg.n_layers - 1) / (fit - 1)) for i in range(fit)}
    if preferred is not None and preferred not in spaced:
        spaced.discard(min(spaced, key=lambda l: abs(l - preferred)))
        spaced.add(preferred)
    return sorted(spaced)


@torch.inference_mode()
def capture_attention(lm, prompt_ids: list[int], output_ids: list[int], layers=None) -> AttentionCapture:
    """The attention of `layers` (default all) for a finished run, from one explicit-softmax forward pass."""
    layers = sorted(set(range(lm.config.n_layers) if layers is None else layers))
    T = len(prompt_ids)
    seq = list(prompt_ids) + list(output_ids[:-1])  # every token that was ever fed to the model
    capture = AttentionCapture(layers=[], prefill=[], decode=[])

    def keep(layer: int, probs: torch.Tensor) -> None:
        p = probs[0].half().cpu()  # (H, S, S) of the first sequence
        capture.layers.append(layer)
        capture.prefill.append(p[:, :T, :T].numpy().copy())  # (H, T, T)
        capture.decode.append([p[:, T + s, : T + s + 1].numpy().copy() for s in range(len(seq) - T)])  # (H, T+s+1)

    cache = KVCache(lm.config, 1, len(seq), lm.dtype, lm.device)  # scratch: thrown away afterwards
    ids = torch.tensor([seq], device=lm.device)  # (1, T + N - 1)
    lm.forward(ids, cache, capture_layers=tuple(layers), on_probs=keep, last_layer=max(layers))
    return capture
