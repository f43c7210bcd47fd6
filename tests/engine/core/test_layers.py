"""Attention layers: the explicit path stays finite in float16."""

import torch

from engine.core.layers import attention_explicit


def test_explicit_attention_does_not_overflow_in_float16():
    torch.manual_seed(0)
    q = (torch.randn(1, 2, 4, 64) * 40).half()  # scores ~ 40*40*64 = 100k: beyond float16's 65,504
    k = (torch.randn(1, 2, 4, 64) * 40).half()
    v = torch.randn(1, 2, 4, 64).half()
    out, probs = attention_explicit(q, k, v)
    want, want_probs = attention_explicit(q.float(), k.float(), v.float())
    assert torch.isfinite(out).all() and torch.isfinite(probs).all()
    torch.testing.assert_close(probs.float(), want_probs, atol=2e-3, rtol=0)
