"""The flat decode loop (Transformer.decode_rows) gives the blocks' forward, bit for bit, and steps aside when it must;
run_pass (engine/core/backends.py) sends each pass where its backends say."""
import dataclasses

import pytest
import torch

import engine
from engine.core.generate import decode_step, greedy, new_cache, prefill
from engine.core.layers import apply_rope, rope_tables, rotate_rows, signed_sin
from engine.techniques.kernels import with_kernels, without_decode_step


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotate_rows_gives_apply_ropes_bits(dtype):
    cos, sin = rope_tables(16, 64, 10000.0)
    x = torch.randn(3, 7, 1, 16, generator=torch.Generator().manual_seed(0)).to(dtype)  # (B, heads, 1, D)
    c, s = cos[41].to(dtype), sin[41].to(dtype)  # (D,)
    want = apply_rope(x, c, s)
    assert torch.equal(rotate_rows(x[:, :, 0], c, signed_sin(s)), want[:, :, 0])


def _steps(lm, flat: bool, batch: int = 1, steps: int = 6):
    """Decode steps through the flat loop (flat) or the blocks, the lm's matmul kernels either way."""
    lm = dataclasses.replace(lm, backends=dataclasses.replace(lm.backends, decode_step=None, flat_decode=flat))
    ids = torch.randint(0, lm.config.vocab_size, (batch, 9), generator=torch.Generator().manual_seed(1))
    cache = new_cache(lm, batch, 9 + steps)
    token = greedy(prefill(lm, ids, cache))
    out = []
    for _ in range(steps):
        logits = decode_step(lm, token, cache)
        out.append(logits)
        token = greedy(logits)
    return torch.stack(out), [k.clone() for k in cache.keys], cache.length


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_flat_decode_gives_the_blocks_bits(dtype, batch):
    lm = engine.load_model("tiny-llama", device="cpu", dtype=dtype)
    flat_logits, flat_keys, flat_len = _steps(lm, True, batch)
    mod_logits, mod_keys, mod_len = _steps(lm, False, batch)
    assert torch.equal(flat_logits, mod_logits)
    assert all(torch.equal(a, b) for a, b in zip(flat_keys, mod_keys))
    assert flat_len == mod_len


def test_flat_decode_gives_the_blocks_bits_through_the_fast_kernels(tiny_llama, tmp_path):
    fast = with_kernels(tiny_llama, "fast", tmp_path)
    assert torch.equal(_steps(fast, True)[0], _steps(fast, False)[0])


@pytest.mark.parametrize("batch", [1, 3])
def test_flat_decode_is_what_a_decode_step_runs_without_a_decode_step_of_its_own(tiny_llama, monkeypatch, batch):
    calls = []
    model = tiny_llama.model
    monkeypatch.setattr(type(model), "decode_rows", lambda self, *a: calls.append(1) or torch.zeros(batch, 5))
    for lm in (tiny_llama, without_decode_step(tiny_llama)):
        calls.clear()
        cache = new_cache(lm, batch, 8)
        prefill(lm, torch.zeros(batch, 3, dtype=torch.long), cache)
        decode_step(lm, torch.zeros(batch, dtype=torch.long), cache)
        stepped = lm.backends.decode_step is not None and batch == 1  # a batch-1 step of its own takes the step
        assert calls == ([] if stepped else [1])


def test_hooks_on_the_blocks_make_decode_run_the_modules(tiny_llama):
    seen = []
    handle = tiny_llama.model.blocks[0].attn.register_forward_pre_hook(lambda m, a: seen.append(1))
    try:
        cache = new_cache(tiny_llama, 1, 8)
        token = greedy(prefill(tiny_llama, torch.zeros(1, 3, dtype=torch.long), cache))
        seen.clear()
        decode_step(tiny_llama, token, cache)
    finally:
        handle.remove()
    assert seen == [1]


def test_gpt2_decode_still_runs_the_blocks(tiny_gpt2):
    lm = dataclasses.replace(tiny_gpt2)
    cache = new_cache(lm, 1, 8)
    token = greedy(prefill(lm, torch.zeros(1, 3, dtype=torch.long), cache))
    assert decode_step(lm, token, cache).shape == (1, lm.config.vocab_size)


def test_one_token_with_all_logits_keeps_its_token_axis(tiny_llama):
    """Prompt lookup checks a draft of zero tokens as a (1, 1) pass with all_logits: (B, T, V), never (B, V)."""
    cache = new_cache(tiny_llama, 1, 16)
    prefill(tiny_llama, torch.tensor([[3, 4, 5]]), cache)
    logits = prefill(tiny_llama, torch.tensor([[6]]), cache, all_logits=True)
    assert logits.shape == (1, 1, tiny_llama.config.vocab_size)
