"""Prefill in chunks fills the same cache and gives the same next token as one pass."""
import pytest
import torch

from engine.core.generate import greedy, new_cache, prefill
from engine.errors import EngineError
from engine.techniques.prefill_chunks import prefill_chunked


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gpt2"])
@pytest.mark.parametrize("chunk", [1, 5, 16, 64])
def test_chunks_match_one_pass(request, name, chunk):
    lm = request.getfixturevalue(name)
    ids = torch.randint(0, lm.config.vocab_size, (2, 37), generator=torch.Generator().manual_seed(1))  # (B, T)
    whole, parts = new_cache(lm, 2, 40), new_cache(lm, 2, 40)
    want = prefill(lm, ids, whole)
    got = prefill_chunked(lm, ids, parts, chunk)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert torch.equal(greedy(got), greedy(want))
    assert parts.length == whole.length == 37
    for layer in range(lm.config.n_layers):  # the cache holds the same keys and values for the next decode step
        torch.testing.assert_close(parts.keys[layer][:, :, :37], whole.keys[layer][:, :, :37], rtol=1e-4, atol=1e-4)


def test_bad_chunk_is_a_clear_error(tiny_llama):
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(EngineError, match="chunk"):
        prefill_chunked(tiny_llama, ids, new_cache(tiny_llama, 1, 8), 0)
    with pytest.raises(EngineError, match="at least one"):
        prefill_chunked(tiny_llama, ids[:, :0], new_cache(tiny_llama, 1, 8), 4)

