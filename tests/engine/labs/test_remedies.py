"""Remedies: each one keeps the model's answer and does what it claims (no timing thresholds here)."""

import pytest
import torch

import engine
from engine.core.generate import new_cache, prefill
from engine.labs import decode_paths, remedies, step_overhead
from engine.labs.decode_paths import has_fused_step
from engine.techniques.prefix_cache import PrefixCache, chat_ids, common_prefix_len, two_turn_chat
from engine.techniques.quantize import Int8Linear, compare_logits, matrix_bytes, quantize_model, quantize_weight
from engine.techniques.speculative import find_draft, generate_speculative

COPY_PROMPT = "Prefill reads the prompt in one parallel pass; decode writes one token per step and reads the KV cache"


def test_find_draft_uses_most_recent_longest_match():
    seq = [1, 2, 3, 7, 8, 1, 2, 3, 9, 4, 2, 3]
    assert find_draft(seq, 2) == [9, 4]  # "2 3" last seen before 9 (trigram "4 2 3" has no earlier match)
    assert find_draft([5, 6, 7], 3) == []
    assert find_draft([1, 2, 1], 4) == [2, 1]
    assert find_draft([1, 2, 1], 0) == []


@pytest.mark.parametrize("prompt", [COPY_PROMPT, "def add(a, b):", "Hi"])
@pytest.mark.parametrize("k", [1, 4])
def test_prompt_lookup_matches_greedy_tiny(tiny_llama, prompt, k):
    greedy = engine.generate(tiny_llama, prompt, 40, ignore_eos=True)
    spec = generate_speculative(tiny_llama, prompt, 40, k=k, ignore_eos=True)
    assert spec.trace.output_ids == greedy.output_ids
    assert len(spec.passes) == len(spec.trace.steps) <= greedy.n_output - 1
    assert sum(p.emitted for p in spec.passes) == greedy.n_output - 1


def test_prompt_lookup_matches_greedy_gpt2(tiny_gpt2):
    greedy = engine.generate(tiny_gpt2, COPY_PROMPT, 30, ignore_eos=True)
    assert generate_speculative(tiny_gpt2, COPY_PROMPT, 30, ignore_eos=True).trace.output_ids == greedy.output_ids


def test_prompt_lookup_respects_context_window(tiny_llama):
    n = tiny_llama.config.max_seq_len
    ids = [int(t) for t in torch.arange(n - 10) % 50]  # a repetitive prompt: drafts everywhere
    greedy = engine.generate(tiny_llama, ids, 10, ignore_eos=True)
    spec = generate_speculative(tiny_llama, ids, 10, k=8, ignore_eos=True)
    assert spec.trace.output_ids == greedy.output_ids


def test_prompt_lookup_cancel(tiny_llama):
    spec = generate_speculative(tiny_llama, COPY_PROMPT, 30, ignore_eos=True, on_step=lambda t: len(t.output_ids) < 3)
    assert spec.trace.stop_reason == "cancelled"


def test_prompt_lookup_real_model_summary(smollm):
    text = ("Summarise in one sentence, reusing the text's words: The single-plank bridge lets riders cross one at a time. "
            "The wide valley lets the whole convoy ride side by side.")
    greedy = engine.generate(smollm, text, 32, chat=True)
    spec = generate_speculative(smollm, text, 32, chat=True)
    assert spec.trace.output_ids == greedy.output_ids
    assert spec.accepted > 0 and spec.tokens_per_pass > 1.0


def test_prefix_cache_logits_equal_full_prefill(tiny_llama):
    turn1 = chat_ids(tiny_llama, [{"role": "user", "content": "Hello bridge"}])
    conv = PrefixCache(tiny_llama, 16)  # small on purpose: turn 2 must grow it
    first = conv.prefill(turn1)
    answer, _ = conv.greedy_answer(first.logits, 6)
    turn2 = turn1 + answer + tiny_llama.tokenizer.encode(" and the valley?")
    reused = conv.prefill(turn2, all_logits=True)
    assert reused.reused_tokens == len(turn1) + len(answer) - 1
    full = prefill(tiny_llama, torch.tensor([turn2]), new_cache(tiny_llama, 1, len(turn2)), all_logits=True)  # (1, T, V)
    torch.testing.assert_close(reused.logits, full[:, reused.reused_tokens:], atol=1e-4, rtol=1e-4)


def test_two_turn_chat_reuses_prefix(tiny_gpt2):
    r = two_turn_chat(tiny_gpt2, "Hello bridge", "And the valley?", answer_tokens=6, decode_tokens=3)
    assert r.reused.reused_tokens == common_prefix_len(r.turn1_ids + r.answer_ids[:-1], r.turn2_ids) > 0
    assert r.reused.computed_tokens + r.reused.reused_tokens == len(r.turn2_ids) == r.full.computed_tokens
    assert r.max_logit_diff < 1e-4


def test_int8_weight_roundtrip():
    w = torch.randn(32, 16)
    q, s = quantize_weight(w)
    assert q.dtype == torch.int8 and s.shape == (32,)
    assert float((q.float() * s[:, None] - w).abs().max()) <= float(s.max()) / 2 + 1e-6


def test_int8_model_close_to_float(tiny_llama):
    qlm, kernel = quantize_model(tiny_llama)
    assert isinstance(qlm.model.lm_head, Int8Linear) and isinstance(qlm.model.blocks[0].mlp.down, Int8Linear)
    assert isinstance(tiny_llama.model.blocks[0].mlp.down, torch.nn.Linear)  # the original is untouched
    assert matrix_bytes(qlm.model) < 0.3 * matrix_bytes(tiny_llama.model)
    prompts = [tiny_llama.tokenizer.encode(COPY_PROMPT), tiny_llama.tokenizer.encode("def add(a, b):")]
    agree = compare_logits(tiny_llama, qlm, prompts)
    print(f"int8 via {kernel}: top-1 agreement {agree.top1_agreement:.2%}, rel. error {agree.rel_error:.4f}")
    assert agree.rel_error < 0.05
    assert agree.top1_agreement >= 0.9
    ids = prompts[0]
    # the decode path (int8 kernel, M=1) and the prefill path (dequantise, M>1) agree with each other, up to the
    # kernel's bfloat16 activations (8 significant bits) where it uses them
    full = prefill(qlm, torch.tensor([ids]), new_cache(qlm, 1, len(ids)), all_logits=True)[0, -1]
    cache = new_cache(qlm, 1, len(ids))
    prefill(qlm, torch.tensor([ids[:-1]]), cache)
    step = engine.decode_step(qlm, torch.tensor([ids[-1]]), cache)[0]
    bf16 = qlm.model.lm_head.kernel_dtype == torch.bfloat16
    torch.testing.assert_close(step, full, atol=1e-2 if bf16 else 1e-3, rtol=1e-2 if bf16 else 1e-3)
    assert torch.equal(step.argmax(), full.argmax())


def test_no_cache_same_tokens(tiny_llama):
    r = remedies.measure_kv_cache(tiny_llama, "Hello bridge", 12, chat=False)
    assert r.same_tokens and r.cached.output_ids
    assert [s.kv_length for s in r.uncached.steps] == sorted(s.kv_length for s in r.uncached.steps)


def test_measurements_return_rows(tiny_llama):
    rows = remedies.measure_speculative(tiny_llama, {"copy": COPY_PROMPT, "open": "Hi"}, 16, chat=False)
    assert [r.label for r in rows] == ["copy", "open"] and all(r.identical for r in rows)
    pref = remedies.measure_prefix_cache(tiny_llama, "Hello bridge", "And the valley?", answer_tokens=6, decode_tokens=3, repeats=1)
    assert pref.reused_tokens > 0 and pref.max_logit_diff < 1e-4
    i8 = remedies.measure_int8(tiny_llama, "Hello bridge", 6, chat=False, repeats=1)
    fused = has_fused_step(tiny_llama)  # whether this machine's fast load kept a fused batch-1 step for it
    assert [r.label for r in i8.rows] == ["float32" + (" (the loop int8 runs)" if fused else ""), "int8 weights"]
    assert i8.rows[1].matrix_bytes < i8.rows[0].matrix_bytes and (i8.run_row is not None) == fused
    assert {r.path for r in i8.rows} == {decode_paths.FLAT_LOOP}
    kern = remedies.measure_kernels(tiny_llama, "Hello bridge", 6, chat=False, repeats=1)
    assert [r.label for r in kern.rows] == ["plain (nn.Linear)", "fast kernels"] and kern.same_tokens
    assert kern.rows[0].matrix_bytes == kern.rows[1].matrix_bytes > 0 and kern.fast_label.startswith("fast")
    over = step_overhead.measure_overhead(tiny_llama, context=16, steps=4)
    assert over.skeleton_step_s > 0 and over.real_step_s > 0 and "skeleton" in over.method


def test_measurement_cancel(tiny_llama):
    with pytest.raises(remedies.Cancelled):
        remedies.measure_kv_cache(tiny_llama, "Hello bridge", 12, chat=False, progress=lambda m, f: False)
    with pytest.raises(remedies.Cancelled):
        step_overhead.measure_overhead(tiny_llama, progress=lambda m, f: False)


def test_overhead_skeleton_has_deterministic_finite_weights(tiny_llama):
    one, two = step_overhead.skeleton_of(tiny_llama), step_overhead.skeleton_of(tiny_llama)
    for p, q in zip(one.model.parameters(), two.model.parameters()):
        assert torch.isfinite(p).all() and torch.equal(p, q)


def test_rows_are_medians_of_interleaved_runs_on_a_named_path(tiny_llama):
    from engine.labs.decode_paths import decode_path

    rows = remedies.measure_models({"a": tiny_llama, "b": tiny_llama}, "Hello bridge", 5, chat=False, repeats=3)
    for r in rows:
        assert len(r.ttft_runs) == len(r.tpot_runs) == 3
        assert r.ttft_s == pytest.approx(sorted(r.ttft_runs)[1]) and r.tpot_s == pytest.approx(sorted(r.tpot_runs)[1])
        assert r.cpu_wait.runs == 3 and r.path == decode_path(tiny_llama, 1)
