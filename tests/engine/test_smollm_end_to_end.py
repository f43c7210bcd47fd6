"""End-to-end checks on the real bundled SmolLM2-135M-Instruct (CPU, fp32)."""
import numpy as np
import pytest
import torch

import engine
from engine.loading.model_store import bundled_folder

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Translate to French: The bridge is narrow and the valley is wide.",
]


@pytest.fixture(scope="module")
def hf_reference():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(bundled_folder(), dtype=torch.float32).eval()


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_tokens_identical_to_transformers_generate(smollm, hf_reference, prompt):
    ids = smollm.tokenizer.encode(prompt)
    ours = engine.generate(smollm, ids, 20, ignore_eos=True).output_ids
    theirs = hf_reference.generate(torch.tensor([ids]), max_new_tokens=20, min_new_tokens=20, do_sample=False)
    assert ours == theirs[0, len(ids):].tolist()


def test_cached_and_no_cache_paths_agree(smollm):
    ids = smollm.tokenizer.encode(PROMPTS[0])
    cached = engine.generate(smollm, ids, 8, ignore_eos=True)
    uncached = engine.generate_no_cache(smollm, ids, 8)
    assert uncached.output_ids == cached.output_ids[: len(uncached.output_ids)]
    assert len(uncached.output_ids) >= 4


def test_one_pass_capture_equals_what_prefill_and_each_decode_step_attended(smollm):
    """The capture is one explicit pass over prompt + output; check it against a step-by-step replay:
    a prefill of the prompt, then one decode step per output token, each with the explicit softmax."""
    layers = (0, 17, 29)
    trace = engine.generate(smollm, PROMPTS[2], 6, capture_attention=True, capture_layers=list(layers), ignore_eos=True)
    T = trace.n_prompt
    cache = engine.KVCache(smollm.config, 1, T + len(trace.output_ids), smollm.dtype)
    _, probs = smollm.model(torch.tensor([trace.prompt_ids]), cache, capture_layers=layers)
    for li, layer in enumerate(layers):
        np.testing.assert_allclose(trace.attention.prefill[li], probs[layer][0].numpy(), atol=2e-3)  # (H, T, T)
    for s, token in enumerate(trace.output_ids[:-1]):
        _, probs = smollm.model(torch.tensor([[token]]), cache, capture_layers=layers)  # one decode step
        for li, layer in enumerate(layers):
            np.testing.assert_allclose(trace.attention.decode[li][s], probs[layer][0, :, 0].numpy(), atol=2e-3)
    assert len(trace.attention.decode[0]) == trace.n_output - 1


def test_kv_bytes_follow_the_formula(smollm):
    trace = engine.generate(smollm, PROMPTS[1], 5, ignore_eos=True)
    assert trace.kv_bytes_per_token == 2 * 30 * 3 * 64 * 4 == 46_080
    assert trace.steps[-1].kv_bytes == (trace.n_prompt + 4) * 46_080


def test_same_seed_same_text(smollm):
    texts = [engine.generate(smollm, PROMPTS[0], 12, temperature=0.8, top_p=0.95, seed=11).text for _ in range(2)]
    assert texts[0] == texts[1]


def test_chat_template_and_limits(smollm):
    trace = engine.generate(smollm, "Say hello.", 8, chat=True)
    assert smollm.tokenizer.decode(trace.prompt_ids).count("<|im_start|>") >= 2
    with pytest.raises(engine.EngineError, match="allows 8192 tokens"):
        engine.generate(smollm, list(range(10, 8300)), 1)
    with pytest.raises(engine.EngineError, match="at most 8092"):
        engine.generate(smollm, list(range(10, 110)), 9000)
    for text in ["🙂🌉 ок 中文", "<b>bold</b>\x07"]:
        ids = smollm.tokenizer.encode(text, add_special_tokens=False)
        assert smollm.tokenizer.decode(ids) == text
        assert "".join(engine.core.prompting.token_pieces(smollm.tokenizer, ids)) == text


def test_greedy_tokens_are_the_same_alone_queued_and_batched(smollm):
    """Continuous batching must not change anyone's answer: three prompts of different lengths, each alone,
    then through the queue, then all in one batch (rows of different lengths sharing every decode step)."""
    from engine.serving.scheduling.scheduler import Scheduler
    from engine.serving.scheduling.work import ModelSpec, Request, result_of

    prompts = [smollm.tokenizer.encode(p) for p in PROMPTS]
    lengths = [24, 16, 20]
    alone = [engine.generate(smollm, p, n, ignore_eos=True).output_ids for p, n in zip(prompts, lengths)]
    spec = ModelSpec("smollm2-135m", "cpu")
    for mode in ("queue", "batch"):
        scheduler = Scheduler(mode).start()
        try:
            reqs = [scheduler.submit(Request(model=spec, prompt_ids=p, max_new_tokens=n,
                                             params=engine.SamplingParams(ignore_eos=True)))
                    for p, n in zip(prompts, lengths)]
            traces = [result_of(r, timeout=300) for r in reqs]
        finally:
            scheduler.stop()
        assert [t.output_ids for t in traces] == alone, mode
        if mode == "batch":
            assert max(max(s.riders for s in t.steps) for t in traces) == 3
