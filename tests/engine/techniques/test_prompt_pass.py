"""A bfloat16 model's prompts in float32 from a widened copy: the float32 model's numbers, the bfloat16 cache a decode
step expects, only for wide passes, and a measured, cached verdict that decides whether the copy is kept."""
import dataclasses
import json

import pytest
import torch

import engine
from engine.core.backends import EAGER
from engine.core.kv_cache import KVCache
from engine.techniques import kernels, measured_cache, prompt_pass
from engine.techniques.kernels import with_kernels, without_decode_step
from engine.techniques.prompt_pass import FLOAT32_PROMPTS, PromptPass

LABEL = "prompts in float32 (widened copy)"


@pytest.fixture(scope="module")
def half_llama():
    return engine.load_model("tiny-llama", device="cpu", dtype="bfloat16", kernels="plain")


@pytest.fixture(scope="module")
def passes(half_llama):
    model32 = prompt_pass.widened_copy(half_llama.model)
    return PromptPass(model32, EAGER, prompt_pass.copy_bytes(model32))


@pytest.fixture
def prompts_only(monkeypatch):
    """The prompt paths and the matmuls only (the decode steps have tests of their own)."""
    monkeypatch.setattr(kernels, "DECODE_STEPS", ())


def _race(fast_ms: float, rival_ms: float, monkeypatch) -> None:
    """The float32 pass timed at fast_ms, the model's own at rival_ms."""
    monkeypatch.setattr(type(FLOAT32_PROMPTS), "race", lambda *a: (fast_ms, rival_ms))


def _with_pass(lm, passes):
    """`lm` (the same model and kernels) whose wide passes go to `passes`."""
    return dataclasses.replace(lm, backends=dataclasses.replace(lm.backends, prompt_pass=passes))


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
    got = lm.forward(ids, got_cache)[0]  # (1, V)
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
    a, b = lm.forward(step, got_cache)[0], half_llama.model(step, half_cache)[0]
    assert a.argmax(-1).tolist() == b.argmax(-1).tolist() and got_cache.length == 38


@torch.inference_mode()
def test_only_wide_passes_go_to_float32(half_llama, passes, monkeypatch):
    cfg = half_llama.config
    lm = _with_pass(half_llama, passes)
    calls = []
    monkeypatch.setattr(PromptPass, "__call__", lambda self, ids, cache, plan, all_logits: calls.append(ids.shape))
    cache = KVCache(cfg, 2, 64, torch.bfloat16)
    lm.forward(torch.ones(1, 9, dtype=torch.long), cache.rows(0, 1))  # 9 tokens: wide
    lm.forward(torch.ones(2, 5, dtype=torch.long), cache)  # 2 x 5 = 10 tokens: wide
    assert calls == [(1, 9), (2, 5)]
    cache.reset()
    lm.forward(torch.ones(1, 8, dtype=torch.long), cache.rows(0, 1))  # 8 tokens: the decode kernels' width, bfloat16
    lm.forward(torch.ones(1, 1, dtype=torch.long), cache.rows(0, 1))  # a decode step
    lm.forward(torch.ones(1, 12, dtype=torch.long), cache.rows(1, 2), capture_layers=(0,))  # a capture: its probabilities
    lm.forward(torch.ones(1, 12, dtype=torch.long), KVCache(cfg, 1, 16, torch.bfloat16), last_layer=0)
    assert calls == [(1, 9), (2, 5)]


@torch.inference_mode()
def test_a_ragged_pass_and_a_cached_prefix_read_the_bfloat16_cache_widened(half_llama, passes):
    """Chunked prefill beside a decode row (a ragged pass) and a prompt on top of a cached prefix attend over
    bfloat16 history from float32 queries."""
    cfg = half_llama.config
    lm = _with_pass(half_llama, passes)
    cache, half_cache = KVCache(cfg, 2, 64, torch.bfloat16), KVCache(cfg, 2, 64, torch.bfloat16)
    for c, forward in ((cache, lm.forward), (half_cache, half_llama.model)):
        forward(torch.arange(5, 25)[None], c.rows(0, 1))  # row 0: a 20-token prompt
        forward(torch.arange(7, 17)[None], c.rows(1, 2))  # row 1: 10 tokens, then 12 more on top of them
        forward(torch.arange(30, 42)[None], c.rows(1, 2))
    logits, _ = lm.forward(torch.arange(1, 12)[None], cache, plan=cache.plan_ragged([1, 10]))  # (2, V)
    want, _ = half_llama.model(torch.arange(1, 12)[None], half_cache, plan=half_cache.plan_ragged([1, 10]))
    torch.testing.assert_close(logits, want, rtol=0.05, atol=0.05 * float(want.abs().max()))
    assert cache.lengths.tolist() == [21, 32]


def test_gpt2_family_widens_too():
    lm = engine.load_model("tiny-gpt2", device="cpu", dtype="bfloat16", kernels="plain")
    model32 = prompt_pass.widened_copy(lm.model)
    assert model32.pos_emb.weight.dtype == torch.float32
    assert FLOAT32_PROMPTS.check(lm, EAGER, PromptPass(model32, EAGER, 0))


def test_only_half_precision_on_cpu(half_llama):
    assert FLOAT32_PROMPTS.fit(half_llama, EAGER).ok
    assert FLOAT32_PROMPTS.fit(dataclasses.replace(half_llama, dtype=torch.float32), EAGER).why_not.startswith("bfloat16")
    assert FLOAT32_PROMPTS.fit(dataclasses.replace(half_llama, device=torch.device("cuda")), EAGER).why_not == "CPU only"


def _verdicts(path):
    file = path / measured_cache.CACHE_FILE
    data = json.loads(file.read_text()) if file.exists() else {}
    return [e["record"] for e in data.values() if e["key"].get("what") == FLOAT32_PROMPTS.name]


def test_the_verdict_is_measured_once_cached_and_said(half_llama, tmp_path, monkeypatch, prompts_only):
    _race(20.0, 30.0, monkeypatch)  # float32 faster: kept
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.backends.prompt_pass is not None and half_llama.backends.prompt_pass is None
    assert LABEL in fast.kernels and fast.model is half_llama.model
    assert f"{FLOAT32_PROMPTS.name}: used (float32 20.0 ms vs own dtype 30.0 ms for a 128-token prompt" in fast.kernel_why
    assert [v["use"] for v in _verdicts(tmp_path)] == [True]
    monkeypatch.setattr(type(FLOAT32_PROMPTS), "race", lambda *a: pytest.fail("timed again despite the cache"))
    again = with_kernels(half_llama, "fast", tmp_path)
    assert again.backends.prompt_pass is not None and "cached verdict" in again.kernel_why
    plain = with_kernels(again, "plain")
    assert plain.backends.prompt_pass is None and LABEL not in plain.kernels
    eager = without_decode_step(again)
    assert eager.backends.prompt_pass is again.backends.prompt_pass  # the one copy, never copied again


def test_a_lost_verdict_keeps_no_copy(half_llama, tmp_path, monkeypatch, prompts_only):
    _race(19.8, 20.0, monkeypatch)  # within the margin: not worth it
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.backends.prompt_pass is None and LABEL not in fast.kernels
    assert f"{FLOAT32_PROMPTS.name}: not used (float32 19.8 ms vs own dtype 20.0 ms" in fast.kernel_why
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("widened despite a cached loss"))
    assert with_kernels(half_llama, "fast", tmp_path).backends.prompt_pass is None


def test_a_pass_that_disagrees_is_refused_and_a_copy_that_fails_is_said(half_llama, tmp_path, monkeypatch,
                                                                          prompts_only):
    _race(10.0, 30.0, monkeypatch)
    real_copy = prompt_pass.widened_copy

    def wrong(plain):  # a copy whose last layer's MLP weights are off: other logits
        model32 = real_copy(plain)
        model32.blocks[-1].mlp.down.weight.mul_(3.0)
        return model32

    monkeypatch.setattr(prompt_pass, "widened_copy", wrong)
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.backends.prompt_pass is None and "its outputs differed" in fast.kernel_why

    def no_room(plain):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(prompt_pass, "widened_copy", no_room)
    fast = with_kernels(half_llama, "fast", tmp_path / "other")
    assert fast.backends.prompt_pass is None
    assert "could not build it here: RuntimeError: out of memory" in fast.kernel_why


def test_float32_models_never_widen(tmp_path, monkeypatch, prompts_only):
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("a float32 model widened"))
    fast = with_kernels(engine.load_model("tiny-llama", device="cpu", kernels="plain"), "fast", tmp_path)
    assert fast.backends.prompt_pass is None and FLOAT32_PROMPTS.name not in fast.kernel_why


@torch.inference_mode()
def test_the_race_times_both_passes(half_llama, passes):
    wide_ms, half_ms = FLOAT32_PROMPTS.race(half_llama, EAGER, passes)
    assert half_ms > 0 and wide_ms > 0


def test_no_copy_where_it_would_take_more_than_half_the_free_memory(half_llama, tmp_path, monkeypatch, prompts_only):
    _race(10.0, 30.0, monkeypatch)
    need = 4 * sum(p.numel() for p in {id(p): p for p in half_llama.model.parameters()}.values())
    monkeypatch.setattr(prompt_pass, "available_memory_bytes", lambda device: int(1.9 * need))
    monkeypatch.setattr(prompt_pass, "widened_copy", lambda plain: pytest.fail("widened without the memory for it"))
    fast = with_kernels(half_llama, "fast", tmp_path)
    assert fast.backends.prompt_pass is None and "a float32 copy of the weights needs" in fast.kernel_why
    assert _verdicts(tmp_path) == []  # not remembered: memory may be free next time
    monkeypatch.undo()
    monkeypatch.setattr(kernels, "DECODE_STEPS", ())
    _race(10.0, 30.0, monkeypatch)
    monkeypatch.setattr(prompt_pass, "available_memory_bytes", lambda device: int(2.1 * need))
    assert with_kernels(half_llama, "fast", tmp_path).backends.prompt_pass is not None
