"""Attention capture stays within its memory budget and frees as it goes."""

import numpy as np


def test_capture_is_bounded_and_frees_as_it_goes(tiny_llama):
    from engine.core.capture import capture_attention, capture_bytes, layers_within_budget

    cfg = tiny_llama.config
    assert layers_within_budget(cfg, 64, 32) == list(range(cfg.n_layers))  # small runs: every layer
    assert layers_within_budget(cfg, 200, 50, budget=1) == [cfg.n_layers // 2]  # big runs: one layer
    got = capture_attention(tiny_llama, list(range(1, 21)), list(range(30, 40)), [1])
    assert got.layers == [1] and got.nbytes == capture_bytes(cfg.n_heads, 20, 10)
    assert np.isfinite(np.asarray(got.prefill[0], dtype=np.float32)).all()
