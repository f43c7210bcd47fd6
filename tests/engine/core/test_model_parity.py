"""Our forward pass against transformers' on tiny random GPT-2 and Llama (GQA) models, fp32."""
import pytest
import torch

import engine
from engine.core.config import ModelConfig
from engine.core.layers import attention_explicit, attention_fast
from engine.loading.loader import build_model
from engine.loading.tiny import tiny_hf_model


def ours_and_theirs(arch: str, seed: int = 0):
    hf = tiny_hf_model(arch, seed=seed)
    cfg = ModelConfig.from_hf_config(hf.config)
    ours = build_model(cfg, hf.state_dict(), torch.device("cpu"), torch.float32)
    return ours, hf, cfg


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_prefill_and_every_decode_step_match_transformers(arch):
    ours, hf, cfg = ours_and_theirs(arch)
    torch.manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (2, 12))  # (B, T)
    with torch.no_grad():
        full = hf(ids).logits  # (B, T, V), no cache: the reference for every position
        cache = engine.KVCache(cfg, 2, 12, torch.float32)
        prompt_logits, _ = ours(ids[:, :7], cache, all_logits=True)  # prefill 7 tokens
        torch.testing.assert_close(prompt_logits, full[:, :7], atol=1e-4, rtol=0)
        for t in range(7, 12):  # then one decode step per remaining token
            step_logits, _ = ours(ids[:, t:t + 1], cache)
            torch.testing.assert_close(step_logits, full[:, t], atol=1e-4, rtol=0)
    assert cache.length == 12


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_prefill_on_top_of_a_cached_prefix_matches_one_full_prefill(arch):
    ours, _, cfg = ours_and_theirs(arch)
    ids = torch.randint(0, cfg.vocab_size, (1, 10))
    with torch.no_grad():
        whole, _ = ours(ids, engine.KVCache(cfg, 1, 10, torch.float32), all_logits=True)
        cache = engine.KVCache(cfg, 1, 10, torch.float32)
        ours(ids[:, :6], cache)
        rest, _ = ours(ids[:, 6:], cache, all_logits=True)  # 4 new tokens after a cached prefix of 6
    torch.testing.assert_close(rest, whole[:, 6:], atol=1e-4, rtol=0)


def test_grouped_query_attention_is_really_grouped():
    _, _, cfg = ours_and_theirs("llama")
    assert cfg.n_kv_heads < cfg.n_heads


@pytest.mark.parametrize("n_new,n_total", [(5, 5), (1, 9), (3, 8)])
def test_fast_and_explicit_attention_agree(n_new, n_total):
    torch.manual_seed(0)
    q = torch.randn(2, 6, n_new, 16)  # (B, H, T, D)
    k = torch.randn(2, 3, n_total, 16)  # (B, K, S, D): 2 query heads per KV head
    v = torch.randn(2, 3, n_total, 16)
    explicit, probs = attention_explicit(q, k, v)
    torch.testing.assert_close(attention_fast(q, k, v), explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 6, n_new))
    assert torch.all(probs[..., :, n_total - n_new + 1:].triu() == 0)  # nothing attends to the future


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_greedy_generate_matches_transformers_generate(arch):
    lm = engine.load_model(f"tiny-{arch}")
    hf = tiny_hf_model(arch)
    ids = lm.tokenizer.encode("Prefill reads the prompt in one parallel pass")
    trace = engine.generate(lm, ids, 12, ignore_eos=True, warmup=False)
    want = hf.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, min_new_tokens=12,
                       pad_token_id=0)[0, len(ids):].tolist()
    assert trace.output_ids == want


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_cached_and_no_cache_paths_give_the_same_tokens(arch):
    lm = engine.load_model(f"tiny-{arch}")
    ids = lm.tokenizer.encode("decode writes one token per step")
    cached = engine.generate(lm, ids, 10, ignore_eos=True)
    uncached = engine.generate_no_cache(lm, ids, 10)
    assert uncached.output_ids == cached.output_ids[: len(uncached.output_ids)]
    assert len(uncached.steps) == len(uncached.output_ids) - 1


def test_batch_rows_equal_single_sequences(tiny_llama):
    tok = tiny_llama.tokenizer
    a, b = tok.encode("the wide valley at Longmen")[:6], tok.encode("the single-plank bridge")[:6]
    batch = engine.generate_batch(tiny_llama, [a, b], 8, ignore_eos=True)
    assert batch.batch_output_ids == [engine.generate(tiny_llama, p, 8, ignore_eos=True).output_ids for p in (a, b)]
    assert batch.steps[-1].kv_bytes == 2 * batch.steps[-1].kv_length * batch.kv_bytes_per_token
