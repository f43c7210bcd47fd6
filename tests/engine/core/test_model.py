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


# --- ragged passes: prefill chunks beside decode rows (chunked prefill) --------------------------------------
def whole(lm, ids: list[int]) -> torch.Tensor:
    """Last-position logits (V,) of `ids` prefilled in one pass, alone."""
    cache = engine.KVCache(lm.config, 1, len(ids), lm.dtype)
    return lm.model(torch.tensor([ids]), cache)[0][0]


def chunked(lm, ids: list[int], size: int) -> torch.Tensor:
    """The same prompt fed `size` tokens per ragged pass: each chunk reads the earlier ones through the cache."""
    cache = engine.KVCache(lm.config, 1, len(ids), lm.dtype)
    for start in range(0, len(ids), size):
        piece = ids[start:start + size]
        logits, _ = lm.model(torch.tensor([piece]), cache, plan=cache.plan_ragged([len(piece)]))  # (1, V)
    assert int(cache.lengths[0]) == len(ids)
    return logits[0]


@pytest.mark.parametrize("model", ["tiny_llama", "tiny_gpt2"])
@pytest.mark.parametrize("length,size", [(37, 8), (40, 8), (41, 8), (100, 33), (9, 1), (5, 64)])
def test_a_prompt_in_chunks_gives_the_whole_prefills_logits(model, length, size, request):
    lm = request.getfixturevalue(model)
    ids = torch.randint(1, lm.config.vocab_size, (length,), generator=torch.Generator().manual_seed(length)).tolist()
    torch.testing.assert_close(chunked(lm, ids, size), whole(lm, ids), atol=1e-4, rtol=0)


@pytest.mark.parametrize("model", ["tiny_llama", "tiny_gpt2"])
def test_a_ragged_pass_gives_each_row_its_single_sequence_logits(model, request):
    """Row 0 and 2 decode one token each over histories of different lengths; row 1 takes a 12-token chunk on
    top of 20 cached ones; row 3 sits out. Each row's logits are the ones its sequence gives alone."""
    lm = request.getfixturevalue(model)
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(1, lm.config.vocab_size, (n,), generator=gen).tolist() for n in (9, 32, 17, 6)]
    cache = engine.KVCache(lm.config, 4, 40, lm.dtype)
    for row, (seq, cached) in enumerate(zip(seqs, (8, 20, 16, 6))):  # each row's history, prefilled alone
        lm.model(torch.tensor([seq[:cached]]), cache.rows(row, row + 1))
    counts = [1, 12, 1, 0]
    flat = seqs[0][8:9] + seqs[1][20:32] + seqs[2][16:17]
    logits, _ = lm.model(torch.tensor([flat]), cache, plan=cache.plan_ragged(counts))  # (3, V)
    assert logits.shape[0] == 3 and cache.lengths.tolist() == [9, 32, 17, 6]
    for got, seq in zip(logits, seqs[:3]):
        torch.testing.assert_close(got, whole(lm, seq), atol=1e-4, rtol=0)


def test_a_ragged_pass_refuses_what_it_cannot_do(tiny_llama):
    cache = engine.KVCache(tiny_llama.config, 2, 16, tiny_llama.dtype)
    with pytest.raises(engine.EngineError, match="at least one new token"):
        cache.plan_ragged([0, 0])
    with pytest.raises(engine.EngineError, match="one token count per cache row"):
        cache.plan_ragged([3])
    with pytest.raises(engine.EngineError, match="holds 16 positions"):
        cache.plan_ragged([17, 1])
    with pytest.raises(engine.EngineError, match="captures nothing"):
        tiny_llama.model(torch.ones(1, 3, dtype=torch.long), cache, plan=cache.plan_ragged([2, 1]), capture_layers=(0,))
