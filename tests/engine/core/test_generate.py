"""KV-cache accounting, sampling, traces, attention capture and every bad-input error (tiny models)."""
import dataclasses
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import engine
from engine.core import generate as gen
from engine.core.sampling import make_generator, sample
from engine.core.sampling_params import SamplingParams
from engine.loading import model_store
from engine.techniques.measured_cache import CACHE_FILE


def test_kv_cache_bytes_follow_the_formula(tiny_llama):
    cfg = tiny_llama.config
    cache = engine.KVCache(cfg, batch=3, max_len=20, dtype=torch.float32)
    per_token = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4
    assert cache.bytes_per_token == per_token  # per sequence, the same meaning as Trace.kv_bytes_per_token
    assert cache.nbytes_allocated == 20 * 3 * per_token == sum(t.numel() * 4 for t in cache.keys + cache.values)
    cache.advance(7)
    assert cache.nbytes_used == 7 * 3 * per_token
    cache.truncate(2)
    assert cache.length == 2
    cache.reset()
    assert cache.nbytes_used == 0


def test_smollm2_kv_bytes_per_token_formula():
    from engine.core.config import ModelConfig

    cfg = ModelConfig(arch="llama", vocab_size=49152, n_layers=30, d_model=576, n_heads=9, n_kv_heads=3,
                      head_dim=64, d_ff=1536, max_seq_len=8192, norm_eps=1e-5)
    assert cfg.kv_bytes_per_token(4) == 46_080
    assert cfg.kv_bytes_per_token(2) == 23_040


def test_trace_steps_record_kv_growth(tiny_llama):
    trace = engine.generate(tiny_llama, "one plank at a time", 6, ignore_eos=True)
    assert len(trace.steps) == trace.n_output - 1 == 5
    assert [s.kv_length for s in trace.steps] == list(range(trace.n_prompt + 1, trace.n_prompt + 6))
    assert all(s.kv_bytes == s.kv_length * trace.kv_bytes_per_token for s in trace.steps)
    assert trace.prefill_seconds > 0 and all(s.seconds > 0 for s in trace.steps)


def test_greedy_sampling_is_argmax_and_seeded_sampling_repeats():
    logits = torch.randn(4, 50)
    assert torch.equal(sample(logits), logits.argmax(-1))
    draws = [sample(logits, make_generator(7, torch.device("cpu")), 1.0, 10, 0.9) for _ in range(2)]
    assert torch.equal(draws[0], draws[1])


def test_a_vanishing_temperature_samples_greedily_instead_of_dividing_by_it():
    logits = torch.randn(3, 50) * 20  # 20 / 1e-283 is infinite: its softmax would be NaN
    for t in (2.1e-283, 5e-324, 9e-6):
        assert torch.equal(sample(logits, make_generator(0, torch.device("cpu")), t), logits.argmax(-1))
        assert SamplingParams(temperature=t).checked().greedy
    assert not SamplingParams(temperature=1e-5).greedy  # from vLLM's threshold on, the temperature is used


def test_top_k_and_top_p_keep_only_allowed_tokens():
    logits = torch.tensor([[5.0, 4.0, 1.0, 0.0, -1.0]])
    gen = make_generator(0, torch.device("cpu"))
    assert {int(sample(logits, gen, 1.0, top_k=2)) for _ in range(50)} <= {0, 1}
    assert {int(sample(logits, gen, 1.0, top_p=0.5)) for _ in range(50)} == {0}  # p(token 0) ~ 0.72 > 0.5


def test_same_seed_same_text_different_seed_usually_differs(tiny_llama):
    runs = [engine.generate(tiny_llama, "the valley", 16, temperature=1.0, seed=s, ignore_eos=True).output_ids
            for s in (3, 3, 4)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_trace_json_round_trip_keeps_required_keys(tiny_llama):
    trace = engine.generate(tiny_llama, "Two bends", 5, capture_attention=True)
    data = json.loads(trace.to_json())
    for key in ("model", "device", "dtype", "prompt_ids", "output_ids", "text", "prefill_seconds", "steps", "env"):
        assert key in data
    assert {"seconds", "kv_length", "kv_bytes"} <= set(data["steps"][0])
    assert {"torch", "threads", "device_name"} <= set(data["env"])
    back = engine.Trace.from_json(trace.to_json())
    assert back.output_ids == trace.output_ids and back.steps == trace.steps
    np.testing.assert_allclose(back.attention.prefill[0], trace.attention.prefill[0], atol=1e-3)


def test_capture_shapes_and_probability_rows(tiny_llama):
    trace = engine.generate(tiny_llama, "the bridge and the valley", 4, capture_attention=True, ignore_eos=True)
    T, H = trace.n_prompt, tiny_llama.config.n_heads
    att = trace.attention
    assert att.layers == list(range(tiny_llama.config.n_layers))
    assert att.prefill[0].shape == (H, T, T)
    assert np.allclose(np.triu(att.prefill[0].astype(np.float32), 1), 0)
    assert [row.shape for row in att.decode[0]] == [(H, T + s + 1) for s in range(3)]  # decode[layer][step]
    assert np.allclose(att.decode[1][-1].astype(np.float32).sum(-1), 1, atol=1e-2)
    assert trace.capture_seconds > 0


@pytest.mark.parametrize("text", [
    "emoji 🙂🌉 ok", "中文：你好，世界", "tab\tbell\x07 nul-free \x1b[0m", "<script>alert('x')</script> &amp;",
])
def test_text_round_trips_through_tokenizer(tiny_llama, text):
    tok = tiny_llama.tokenizer
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert "".join(engine.core.prompting.token_pieces(tok, tok.encode(text, add_special_tokens=False))) == text


@pytest.mark.parametrize("prompt,max_new,needle", [
    ("", 4, "empty"),
    ("   \n\t ", 4, "empty"),
    ([], 4, "empty"),
    ("hello", 0, "at least 1"),
    ("hello", -3, "at least 1"),
    ("hello", 10**9, "far beyond"),
    ("hello", 2.5, "whole number"),
    ("hello", 300, "at most"),  # tiny models hold 256 tokens
    ([99999], 4, "outside the vocabulary"),
])
def test_bad_input_gives_a_clear_error(tiny_llama, prompt, max_new, needle):
    with pytest.raises(engine.EngineError, match=needle):
        engine.generate(tiny_llama, prompt, max_new)


def test_prompt_longer_than_context_states_the_limit(tiny_llama):
    with pytest.raises(engine.EngineError, match=r"allows 256 tokens"):
        engine.generate(tiny_llama, list(range(1, 300)), 1)


def test_unknown_model_lists_known_ones():
    with pytest.raises(engine.EngineError, match="smollm2-135m"):
        engine.load_model("no-such-model")


def test_unknown_dtype_and_device_are_explained():
    with pytest.raises(engine.EngineError, match="unknown dtype"):
        engine.load_model("tiny-llama", dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(engine.EngineError, match="no CUDA GPU"):
            engine.load_model("tiny-llama", device="cuda")


def test_hf_id_offline_gives_one_line_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(engine.EngineError, match="Offline, use 'smollm2-135m'"):
        engine.load_model("openai-community/gpt2-does-not-exist")


def test_unwritable_cache_dir_is_explained(monkeypatch, tmp_path):

    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("TWO_BENDS_CACHE", str(blocker / "sub"))
    with pytest.raises(engine.EngineError, match="TWO_BENDS_CACHE"):
        model_store.load_bundled()


def test_bf16_runs_and_tracks_dtype_bytes():
    lm = engine.load_model("tiny-llama", dtype="bfloat16")
    trace = engine.generate(lm, "valley", 3, ignore_eos=True)
    assert trace.dtype == "bfloat16"
    assert trace.kv_bytes_per_token == lm.config.kv_bytes_per_token(2)


@pytest.mark.parametrize("prompt, says", [(" ", "error: the prompt is empty"),
                                           (b"ab\xffcd", "error: the prompt is not valid Unicode text: character 2")])
def test_cli_prints_one_line_errors_not_tracebacks(prompt, says):
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", prompt, "--model", "tiny-llama"],
                         capture_output=True, text=True, timeout=120)  # (bytes that are not UTF-8: as a terminal may send)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(says), out.stderr
    assert "Traceback" not in out.stderr and "loading" not in out.stderr  # refused before the model loads


def test_text_that_is_not_unicode_is_refused_by_name_wherever_it_enters(tiny_llama):
    from engine.core.prompting import chat_ids, encode_prompt, fit_prompt_to_tokens

    with pytest.raises(engine.EngineError, match=r"the prompt is not valid Unicode text: character 1 .*\\ud800"):
        encode_prompt(tiny_llama, "a\ud800")
    with pytest.raises(engine.EngineError, match="the prompt is not valid Unicode text"):
        fit_prompt_to_tokens(tiny_llama.tokenizer, "\udcff", 8)
    with pytest.raises(engine.EngineError, match="message 2 is not valid Unicode text"):
        chat_ids(tiny_llama, [{"role": "user", "content": "fine"}, {"role": "user", "content": "x\udfff"}])


def test_cli_json_has_the_trace_keys():
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", "two bends", "--model", "tiny-llama",
                          "--max-new-tokens", "4", "--ignore-eos", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["output_ids"]) == 4 and len(data["steps"]) == 3


def test_bench_quick_prints_every_row_and_can_measure_the_kernels_again(tmp_path):
    """One quick bench in an empty cache, its kernel verdicts measured again: every row, and what was measured."""
    env = os.environ | {"TWO_BENDS_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "engine", "bench", "--quick", "--repeats", "1", "--model", "tiny-llama",
                          "--remeasure-kernels"], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("# kernels chosen by measurement: "))
    assert "decode step's matmuls: " in line and "plain" in line and "measured now" in line
    assert (tmp_path / CACHE_FILE).is_file()
    for label in ("streaming read", "prefill 32 tokens", "decode step @ context 128", "generate 64 + 8 tokens",
                  "Trace bookkeeping", "fast and plain kernels give the same 8 greedy tokens: True", "no vLLM column",
                  "read by torch in the step's own pieces"):
        assert label in out.stdout
    header = next(line for line in out.stdout.splitlines() if line.startswith("measurement"))
    assert all(col in header for col in ("fast ms", "plain ms", "hf ms", "vLLM ms", "fast/vLLM", "floor ms"))


def test_a_finished_sequence_stops_growing_while_the_batch_goes_on(tiny_llama):
    tok = tiny_llama.tokenizer
    a, b = tok.encode("the wide valley at Longmen")[:6], tok.encode("the single-plank bridge")[:6]
    free = engine.generate_batch(tiny_llama, [a, b], 10, ignore_eos=True).batch_output_ids
    stop = next(t for t in free[0][1:] if t not in free[1] and t not in free[0][:1])  # A makes it, B never does
    lm = dataclasses.replace(tiny_llama, config=dataclasses.replace(tiny_llama.config, eos_token_ids=(stop,)))
    outs = engine.generate_batch(lm, [a, b], 10).batch_output_ids
    ends = free[0].index(stop) + 1
    assert outs[0] == free[0][:ends]  # A's text ends at its end token...
    assert outs[1] == free[1]  # ...while B got all of its tokens


def test_warm_up_state_is_not_on_the_shared_model_and_runs_once(tiny_gpt2):
    assert not hasattr(tiny_gpt2, "warm")  # the loaded model stays read-only for every session
    lm = engine.load_model("tiny-gpt2")  # a fresh model: never warmed
    seconds = []
    threads = [threading.Thread(target=lambda: seconds.append(gen.warm_up(lm, 3))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(s > 0 for s in seconds) == 1  # the others waited for that one warm-up, then skipped it


def test_the_cli_summary_of_a_one_token_answer_says_no_decode_step_ran(tiny_llama):
    from engine.core.metrics import format_summary

    one = format_summary(engine.summarize(engine.generate(tiny_llama, [1, 2, 3], 1)))
    assert "nan" not in one.lower() and "one token: it came from prefill, no decode step ran" in one
    more = format_summary(engine.summarize(engine.generate(tiny_llama, [1, 2, 3], 4, ignore_eos=True)))
    assert "no decode step" not in more and "TPOT" in more and " ms" in more.split("TPOT")[1].splitlines()[0]


def test_the_trace_records_the_backends_and_the_steps_their_decode_step_could_not_serve(tiny_llama):
    """The Trace keeps the typed choice (engine/core/backends.py), and says how many steps ran the eager loop because
    the model's decode step could not serve them (counted by run_pass, not read back from a label)."""
    class Refusing:
        kind, fallbacks = "C", 0

        def serves(self, cache, plan) -> bool:
            return False

        def __call__(self, ids, cache, plan):
            raise AssertionError("never called: it serves nothing")

    plain = engine.generate(tiny_llama, "hello", 4, ignore_eos=True)
    lm = dataclasses.replace(tiny_llama, backends=dataclasses.replace(tiny_llama.backends, decode_step=Refusing()))
    trace = engine.generate(lm, "hello", 4, ignore_eos=True)
    assert trace.output_ids == plain.output_ids and trace.env["backends"]["decode_step"] == "C"
    assert trace.env["backends"]["eager_decode_steps"] == 3
    assert trace.env["kernels"].endswith("(but 3 decode steps of this run ran the eager loop instead of the C step)")
    assert "eager_decode_steps" not in plain.env["backends"] and plain.env["kernels"] == tiny_llama.kernels
