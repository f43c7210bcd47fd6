"""Prefill in chunks fills the same cache and gives the same next token as one pass."""
import dataclasses

import pytest
import torch

from engine.core.generate import greedy, new_cache, prefill
from engine.errors import EngineError
from engine.techniques import prefill_chunks
from engine.techniques.kernels import with_kernels
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


def test_prefill_follows_the_models_chosen_chunk(tiny_llama, monkeypatch):
    calls = []
    chunked = dataclasses.replace(tiny_llama, prefill_chunk=8)
    real = chunked.model.forward
    monkeypatch.setattr(chunked.model, "forward", lambda ids, *a, **k: calls.append(ids.shape[1]) or real(ids, *a, **k))
    ids = torch.randint(0, tiny_llama.config.vocab_size, (1, 20), generator=torch.Generator().manual_seed(2))  # (1, T)
    got = prefill(chunked, ids, new_cache(chunked, 1, 24))
    assert calls == [8, 8, 4]
    want = prefill(tiny_llama, ids, new_cache(tiny_llama, 1, 24))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    calls.clear()
    prefill(chunked, ids, new_cache(chunked, 1, 24), all_logits=True)  # every position's logits: one pass
    assert calls == [20]


def test_choice_is_measured_once_then_cached(tiny_llama, tmp_path, monkeypatch):
    measured = []

    def fake(lm):
        measured.append(1)
        return 256, {0: 10.0, 256: 8.0, 512: 9.0}

    monkeypatch.setattr(prefill_chunks, "measure_chunk", fake)
    lm = dataclasses.replace(tiny_llama, config=dataclasses.replace(tiny_llama.config, max_seq_len=2048))
    chunk, why = prefill_chunks.choose_chunk(lm, tmp_path)
    assert chunk == 256 and "chunks of 256 8.0 ms vs chunks of 512 9.0 ms vs one pass 10.0 ms" in why
    assert "measured now" in why
    chunk, why = prefill_chunks.choose_chunk(lm, tmp_path)
    assert (chunk, len(measured)) == (256, 1) and "cached" in why
    (tmp_path / prefill_chunks.CACHE_FILE).write_text("{not json")  # unreadable: measured again, no crash
    assert prefill_chunks.choose_chunk(lm, tmp_path)[0] == 256 and len(measured) == 2


def test_chunks_must_win_by_the_margin(tiny_llama, monkeypatch):
    lm = dataclasses.replace(tiny_llama, config=dataclasses.replace(tiny_llama.config, max_seq_len=600))
    times = iter([1.0, 0.99, 1.0] * 10)  # chunks 1 % faster only: noise, one pass stays
    monkeypatch.setattr(prefill_chunks, "_time_layer", lambda lm, ids, chunk: next(times))
    chunk, ms = prefill_chunks.measure_chunk(lm)
    assert chunk == 0 and set(ms) == {0, 256, 512}
    monkeypatch.setattr(prefill_chunks, "_time_layer", lambda lm, ids, chunk: {0: 1.0, 256: 0.5, 512: 0.9}[chunk])  # 256 clearly fastest
    assert prefill_chunks.measure_chunk(lm)[0] == 256


def test_plain_twin_prefills_in_one_pass(tiny_llama):
    fast = dataclasses.replace(tiny_llama, kernel_choice="fast", prefill_chunk=256, prefill_why="x")
    plain = with_kernels(fast, "plain")
    assert (plain.prefill_chunk, plain.prefill_why) == (0, "")
