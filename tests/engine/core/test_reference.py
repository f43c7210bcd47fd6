"""The engine a student reads (engine/core/reference.py) and the engine the dashboard runs choose the same tokens:
whatever fast paths a model chose at load, greedy generation equals the eager reference's."""
import pytest
import torch

import engine
from engine.core import reference
from engine.core.kv_cache import KVCache


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gpt2"])
def test_the_reference_loop_gives_the_engines_greedy_tokens(name, request):
    lm = request.getfixturevalue(name)
    ids = lm.tokenizer.encode("Two bends on the old post road: the valley and the bridge.")
    want = engine.generate(lm, ids, 12, ignore_eos=True).output_ids
    assert reference.generate(lm.model, ids, 12) == want


def test_the_reference_stops_at_an_end_token(tiny_llama):
    ids = [5, 6, 7, 8]
    first = reference.generate(tiny_llama.model, ids, 6)
    stop = first.index(first[-1])  # the first time the last token appears: the run ends there
    assert reference.generate(tiny_llama.model, ids, 6, eos_ids=(first[-1],)) == first[:stop + 1]


@torch.inference_mode()
def test_prefill_fills_the_cache_and_each_decode_step_adds_one_position(tiny_llama):
    cache = KVCache(tiny_llama.config, 1, 16, tiny_llama.dtype)
    logits = reference.prefill(tiny_llama.model, torch.tensor([[5, 6, 7]]), cache)
    assert logits.shape == (1, tiny_llama.config.vocab_size) and cache.length == 3
    logits = reference.decode_one_token(tiny_llama.model, logits.argmax(-1, keepdim=True), cache)
    assert logits.shape == (1, tiny_llama.config.vocab_size) and cache.length == 4


def test_the_real_model_through_its_fast_paths_chooses_the_references_tokens(smollm):
    ids = smollm.tokenizer.encode("The two phases of LLM inference are")
    assert reference.generate(smollm.model, ids, 24) == engine.generate(smollm, ids, 24, ignore_eos=True).output_ids
