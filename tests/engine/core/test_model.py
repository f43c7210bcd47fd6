"""The model's forward pass refuses what it cannot do (tiny models)."""

import pytest
import torch

import engine


def test_forward_refuses_positions_beyond_the_context(tiny_llama):
    cfg = tiny_llama.config  # 256 positions
    cache = engine.KVCache(cfg, 1, 300, tiny_llama.dtype)
    engine.prefill(tiny_llama, torch.ones(1, 250, dtype=torch.long), cache)
    with pytest.raises(engine.EngineError, match="exceed the model's context of 256 tokens"):
        engine.prefill(tiny_llama, torch.ones(1, 10, dtype=torch.long), cache)
