"""A bfloat16 model's prompts in float32 from a widened copy: the float32 model's numbers, the bfloat16 cache a decode
step expects, only for wide passes, and a measured, cached verdict that decides whether the copy is kept."""
import dataclasses
import json

import pytest
import torch

import engine
from engine.core.kv_cache import KVCache
from engine.techniques import prompt_pass
from engine.techniques.kernels import PROMPT_LABEL, _twin, with_kernels, without_compiled_decode
from engine.techniques.prompt_pass import PromptPass


@pytest.fixture(scope="module")
def half_llama():
    return engine.load_model("tiny-llama", device="cpu", dtype="bfloat16", kernels="plain")


@pytest.fixture(scope="module")
def passes(half_llama):
    model32 = prompt_pass.widened_copy(half_llama.model)
    return PromptPass(model32, prompt_pass.copy_bytes(model32))


def _with_pass(lm, passes):
    """A twin of `lm` (the same weights and kernels) whose wide passes go to `passes`."""
    twin = dataclasses.replace(lm, model=_twin(lm.model, lambda m: None))
    twin.model.prompt_pass = passes
    assert lm.model.prompt_pass is None
    return twin


def test_the_copy_is_float32_with_the_same_values_tied_weights_tied_and_fresh_rotary_tables(half_llama, passes):
    model, model32 = half_llama.model, passes.model32
    assert all(p.dtype == torch.float32 for p in model32.parameters())
    for (name, p), (name32, p32) in zip(model.named_parameters(), model32.named_parameters()):
        assert name == name32 and torch.equal(p.float(), p32)  # widening is exact
        assert p.dtype == torch.bfloat16  # the model itself untouched
    if half_llama.config.tie_embeddings:
        assert model32.lm_head.weight is model32.tok_emb.weight
    fresh32 = engine.load_model("tiny-llama", device="cpu", kernels="plain").model
    assert torch.equal(model32.rope_cos, fresh32.rope_cos)  # computed in float32, not widened from bfloat16
    assert not torch.equal(model.rope_cos.float(), fresh32.rope_cos)
    assert passes.copy_bytes == 4 * sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


@torch.inference_mode()
def test_a_prompt_runs_in_float32_and_leaves_a_bfloat16_cache_a_decode_step_reads(half_llama, passes):
    cfg = half_llama.config
    lm = _with_pass(half_llama, passes)
    ids = torch.arange(3, 40)[None]  # (1, 37)
    got_cache, half_cache = KVCache(cfg, 1, 48, torch.bfloat16), KVCache(cfg, 1, 48, torch.bfloat16)
    got = lm.model(ids, got_cache)[0]  # (1, V)
    half = half_llama.model(ids, half_cache)[0]
    # the float32 model with the same (widened) weights, over the same bfloat16 cache: the pass's numbers exactly
    ref_cache = KVCache(cfg, 1, 48, torch.bfloat16)
    ref = passes.model32(ids, ref_cache)[0]
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    assert got_cache.length == half_cache.length == 37
    for mine, theirs in zip(got_cache.keys + got_cache.values, half_cache.keys + half_cache.values):
        assert mine.dtype == torch.bfloat16
        torch.testing.assert_close(mine.float(), theirs.float(), rtol=0.05, atol=0.05)
    torch.testing.assert_close(got, half, rtol=0.05, atol=0.05 * float(half.abs().max()))
    # it is more accurate than the bfloat16 pass: closer to the float32 model on the same widened weights with a
    # float32 cache
    exact = passes.model32(ids, KVCache(cfg, 1, 48, torch.float32))[0]
    assert float((got - exact).abs().max()) < float((half - exact).abs().max())
    step = got.argmax(-1, keepdim=True)  # (1, 1): decode continues in bfloat16 from the cache the pass wrote
    a, b = lm.model(step, got_cache)[0], half_llama.model(step, half_cache)[0]
    assert a.argmax(-1).tolist() == b.argmax(-1).tolist() and got_cache.length == 38


@torch.inference_mode()
def test_only_wide_passes_go_to_float32(half_llama, passes, monkeypatch):
    cfg = half_llama.config
    lm = _with_pass(half_llama, passes)
    calls = []
    monkeypatch.setattr(PromptPass, "__call__", lambda self, ids, cache, **kw: calls.append(ids.shape) or (None, {}))
    cache = KVCache(cfg, 2, 64, torch.bfloat16)
    lm.model(torch.ones(1, 9, dtype=torch.long), cache.rows(0, 1))  # 9 tokens: wide
    lm.model(torch.ones(2, 5, dtype=torch.long), cache)  # 2 x 5 = 10 tokens: wide
    assert calls == [(1, 9), (2, 5)]
    cache.reset()
    lm.model(torch.ones(1, 8, dtype=torch.long), cache.rows(0, 1))  # 8 tokens: the decode kernels' width, bfloat16
    lm.model(torch.ones(1, 1, dtype=torch.long), cache.rows(0, 1))  # a decode step
    lm.model(torch.ones(1, 12, dtype=torch.long), cache.rows(1, 2), capture_layers=(0,))  # a capture: its probabilities
    lm.model(torch.ones(1, 12, dtype=torch.long), KVCache(cfg, 1, 16, torch.bfloat16), last_layer=0)
    assert calls == [(1, 9), (2, 5)]


@torch.inference_mode()
def test_a_ragged_pass_and_a_cached_prefix_read_the_bfloat16_cache_widened(half_llama, passes):
    """Chunked prefill beside a decode row (a ragged pass) and a prompt on top of a cached prefix attend over
    bfloat16 history from float32 queries."""
    cfg = half_llama.config
    lm = _with_pass(half_llama, passes)
    cache, half_cache = KVCache(cfg, 2, 64, torch.bfloat16), KVCache(cfg, 2, 64, torch.bfloat16)
    for c, model in ((cache, lm.model), (half_cache, half_llama.model)):
        model(torch.arange(5, 25)[None], c.rows(0, 1))  # row 0: a 20-token prompt
        model(torch.arange(7, 17)[None], c.rows(1, 2))  # row 1: 10 tokens, then 12 more on top of them
        model(torch.arange(30, 42)[None], c.rows(1, 2))
    logits, _ = lm.model(torch.arange(1, 12)[None], cache, plan=cache.plan_ragged([1, 10]))  # (2, V)
    want, _ = half_llama.model(torch.arange(1, 12)[None], half_cache, plan=half_cache.plan_ragged([1, 10]))
    torch.testing.assert_close(logits, want, rtol=0.05, atol=0.05 * float(want.abs().max()))
    assert cache.lengths.tolist() == [21, 32]


def test_gpt2_family_widens_too():
    lm = engine.load_model("tiny-gpt2", device="cpu", dtype="bfloat16", kernels="plain")
    model32 = prompt_pass.widened_copy(lm.model)
    assert model32.pos_emb.weight.dtype == torch.float32
    assert prompt_pass.check(lm.model, PromptPass(model32, 0))


def test_applicable_only_to_half_precision_on_cpu(monkeypatch):
    assert prompt_pass.applicable(torch.bfloat16, torch.device("cpu")) == ""
    assert prompt_pass.applicable(torch.float32, torch.device("cpu"))
    assert prompt_pass.applicable(torch.bfloat16, torch.device("cuda"))
    monkeypatch.setenv(prompt_pass.SWITCH, "off")
    assert "switched off" in prompt_pass.applicable(torch.bfloat16, torch.device("cpu"))


def _verdicts(path):
    file = path / prompt_pass.CACHE_FILE
    data = json.loads(file.read_text()) if file.exists() else {}
    return [e["verdict"] for e in data.values() if e["key"].get("what") == "float32 prompt pass"]


def test_the_verdict_is_measured_once_cached_and_said(half_llama, tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: (30.0, 20.0))  # float32 faster: kept
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.model.prompt_pass is not None and half_llama.model.prompt_pass is None
    assert fast.kernels.endswith(PROMPT_LABEL)
    assert "prompts in float32 from a widened copy" in fast.kernel_why and "20 ms vs bfloat16 30 ms" in fast.kernel_why
    assert [v["use"] for v in _verdicts(tmp_path)] == [True]
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: pytest.fail("timed again despite the cache"))
    again = with_kernels(half_llama, "fast", tmp_path)
    assert again.model.prompt_pass is not None and "cached verdict" in again.kernel_why
    plain = with_kernels(again, "plain")
    assert plain.model.prompt_pass is None and PROMPT_LABEL not in plain.kernels
    eager = without_compiled_decode(again)
    assert eager.model.prompt_pass is again.model.prompt_pass  # twins share the one copy, never copy it again


def test_a_lost_verdict_keeps_no_copy(half_llama, tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: (20.0, 19.8))  # within the margin: not worth it
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.model.prompt_pass is None and PROMPT_LABEL not in fast.kernels
    assert "prompts in bfloat16 (float32 20 ms vs bfloat16 20 ms" in fast.kernel_why
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("widened despite a cached loss"))
    assert with_kernels(half_llama, "fast", tmp_path).model.prompt_pass is None


def test_a_pass_that_disagrees_is_refused_and_a_copy_that_fails_is_said(half_llama, tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: (30.0, 10.0))
    real_copy = prompt_pass.widened_copy

    def wrong(plain):  # a copy whose last layer's MLP weights are off: other logits
        model32 = real_copy(plain)
        model32.blocks[-1].mlp.down.weight.mul_(3.0)
        return model32

    monkeypatch.setattr(prompt_pass, "widened_copy", wrong)
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.model.prompt_pass is None and "logits differed" in fast.kernel_why

    def no_room(plain):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(prompt_pass, "widened_copy", no_room)
    fast = with_kernels(half_llama, "fast", tmp_path / "other")
    assert fast.model.prompt_pass is None and "could not widen the weights (RuntimeError: out of memory)" in fast.kernel_why


def test_float32_models_never_widen(tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("a float32 model widened"))
    fast = with_kernels(engine.load_model("tiny-llama", device="cpu", kernels="plain"), "fast", tmp_path)
    assert fast.model.prompt_pass is None and "prompts" not in fast.kernel_why


@torch.inference_mode()
def test_the_race_times_both_passes_and_puts_the_model_back(half_llama, passes):
    lm = _with_pass(half_llama, passes)
    half_ms, wide_ms = prompt_pass.race(lm.model, passes)
    assert half_ms > 0 and wide_ms > 0 and lm.model.prompt_pass is passes


def test_no_copy_where_it_would_take_more_than_half_the_free_memory(half_llama, tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: (30.0, 10.0))
    need = 4 * sum(p.numel() for p in {id(p): p for p in half_llama.model.parameters()}.values())
    monkeypatch.setattr(prompt_pass, "available_memory_bytes", lambda device: int(1.9 * need))
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("widened without the memory for it"))
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.model.prompt_pass is None and "a float32 copy of the weights needs" in fast.kernel_why
    assert _verdicts(tmp_path) == []  # not remembered: memory may be free next time
    monkeypatch.undo()
    monkeypatch.setattr(prompt_pass, "race", lambda model, passes: (30.0, 10.0))
    monkeypatch.setattr(prompt_pass, "available_memory_bytes", lambda device: int(2.1 * need))
    assert with_kernels(half_llama, "fast", tmp_path).model.prompt_pass is not None
