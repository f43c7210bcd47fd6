"""The prompt's kernels in C (attention, norms, SwiGLU): torch's logits and cache for any prompt, on top of a cached
prefix, any thread count and head shape; torch's ops wherever they cannot serve; a measured, cached verdict that
decides whether they run."""
import dataclasses
import json

import pytest
import torch

import engine
from engine.core.config import ModelConfig
from engine.core.kv_cache import KVCache
from engine.core.model import Transformer
from engine.techniques import c_decode, prompt_kernels
from engine.techniques.kernels import C_LABEL, PROMPT_C_LABEL, _twin, with_kernels
from engine.techniques.prompt_kernels import PromptKernels

pytestmark = pytest.mark.skipif(c_decode.c_compiler() is None, reason="no C compiler (gcc) on this machine")


@pytest.fixture
def building(monkeypatch):
    """The suite switches the prompts' C kernels off (conftest.py); these tests switch them back on (the decode steps
    stay off)."""
    monkeypatch.setenv(prompt_kernels.SWITCH, "on")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return prompt_kernels.load(c_decode.build(tmp_path_factory.mktemp("c-prompt"), prompt_kernels.SOURCE))


@pytest.fixture(scope="module", params=["native", "avx2"])
def any_library(request, library, tmp_path_factory):
    """This CPU's build, and the 8-float-vector build an AVX2-only CPU runs (its own tile: built here with the
    instruction-set cap that emulates such a CPU, when this one can run it)."""
    if request.param == "native":
        return library
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this CPU cannot run an AVX2 build")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATEN_CPU_CAPABILITY", "avx2")
        return prompt_kernels.load(c_decode.build(tmp_path_factory.mktemp("c-prompt-avx2"), prompt_kernels.SOURCE))


def _random_llama(n_heads: int, n_kv_heads: int, head_dim: int, max_seq_len: int = 1200) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(arch="llama", vocab_size=300, n_layers=2, d_model=n_heads * head_dim, n_heads=n_heads,
                      n_kv_heads=n_kv_heads, head_dim=head_dim, d_ff=96, max_seq_len=max_seq_len, norm_eps=1e-5,
                      tie_embeddings=True)
    model = Transformer(cfg).eval().requires_grad_(False)  # its tensors made, not filled: random numbers here
    for name, weight in model.named_parameters():
        weight.uniform_(0.5, 1.5) if name.endswith("norm.weight") else weight.normal_(0, 0.3)
    return model


def _with_c(model: Transformer, library) -> tuple[Transformer, PromptKernels]:
    twin = _twin(model, lambda m: None)
    twin.prompt_kernels = PromptKernels(model.cfg, library)
    return twin, twin.prompt_kernels


def _prompt(model, n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, model.cfg.vocab_size, (1, n), generator=torch.Generator().manual_seed(seed))  # (1, n)


@pytest.mark.parametrize("heads", [(9, 3, 64), (4, 2, 16), (8, 1, 32), (4, 4, 48)])
@torch.inference_mode()
def test_prompts_and_prompts_on_a_cached_prefix_give_the_eager_logits_and_cache(any_library, heads):
    """SmolLM2's grouping (9 query heads, 3 KV heads, 64 dims), the tiny model's, one KV head for eight, none
    shared; prompts shorter than a tile, across tiles and key blocks, and a second prompt on top of the first."""
    model = _random_llama(*heads)
    fast, kernels = _with_c(model, any_library)
    caches = [KVCache(model.cfg, 1, 700, torch.float32) for _ in range(2)]
    for n, seed in ((9, 1), (130, 2), (45, 3), (300, 4)):
        ids = _prompt(model, n, seed)
        want = model(ids, caches[0], all_logits=True)[0]  # (1, n, V)
        got = fast(ids, caches[1], all_logits=True)[0]
        assert float((got - want).abs().max()) < 1e-4 * float(want.abs().max())  # float32 sums in another order
        assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert kernels.calls == 4 * model.cfg.n_layers  # every layer of every prompt ran in C
    end = caches[0].length
    for layer in range(model.cfg.n_layers):
        for kind in ("keys", "values"):
            got, want = getattr(caches[1], kind)[layer], getattr(caches[0], kind)[layer]
            assert float((got - want).abs().max()) < 1e-4 * float(want.abs().max())
            assert not got[:, :, end:].any()  # nothing written past the prompts


@pytest.mark.parametrize("threads", [1, 2, 3])
@torch.inference_mode()
def test_any_thread_count_gives_the_same_numbers(any_library, threads):
    model = _random_llama(9, 3, 64)
    fast, _ = _with_c(model, any_library)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ids = _prompt(model, 200, 5)
        want = model(ids, KVCache(model.cfg, 1, 200, torch.float32))[0]
        got = fast(ids, KVCache(model.cfg, 1, 200, torch.float32))[0]
    finally:
        torch.set_num_threads(before)
    assert float((got - want).abs().max()) < 1e-4 * float(want.abs().max())


@torch.inference_mode()
def test_what_they_cannot_serve_runs_torchs_ops(library):
    """Decode steps, a batch of two, a bfloat16 cache, a ragged pass: torch's ops. A layer whose attention is captured
    for the page's matrix: torch's explicit attention there, the same numbers."""
    model = _random_llama(4, 2, 16)
    fast, kernels = _with_c(model, library)
    ids = _prompt(model, 20, 6)
    fast(ids[:, :5], KVCache(model.cfg, 1, 40, torch.float32))  # 5 tokens: below a prompt's width
    fast(ids.repeat(2, 1), KVCache(model.cfg, 2, 40, torch.float32))
    fast(ids, KVCache(model.cfg, 1, 40, torch.bfloat16))
    ragged = KVCache(model.cfg, 2, 40, torch.float32)
    fast(ids, ragged, plan=ragged.plan_ragged([12, 8]))
    assert kernels.calls == 0
    caches = [KVCache(model.cfg, 1, 40, torch.float32) for _ in range(2)]
    _, want = model(ids, caches[0], capture_layers=(1,))
    _, got = fast(ids, caches[1], capture_layers=(1,))
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-5)  # the captured layer: torch's explicit path
    assert kernels.calls == 1  # the other layer's attention ran in C


@pytest.mark.parametrize("kernel", ["attention", "rms_norm", "silu_mul"])
@torch.inference_mode()
def test_the_check_refuses_a_kernel_with_other_numbers(library, kernel):
    model = _random_llama(9, 3, 64)
    assert prompt_kernels.check(model, PromptKernels(model.cfg, library))
    off = PromptKernels(model.cfg, library)
    right = getattr(off, kernel)
    setattr(off, kernel, lambda *args, **kw: right(*args, **kw) * 1.001)
    assert not prompt_kernels.check(model, off)
    assert model.prompt_kernels is None  # the check leaves the model as it found it


def test_the_suite_and_a_user_can_switch_it_off():
    model = _random_llama(4, 2, 16)
    assert prompt_kernels.applicable(model, torch.float32, torch.device("cpu")) == \
        "switched off (TWO_BENDS_C_PROMPT=off)"


def test_float32_on_cpu_with_heads_of_a_multiple_of_16_only(building):
    cpu = torch.device("cpu")
    assert prompt_kernels.applicable(_random_llama(4, 2, 16), torch.float32, cpu) == ""
    assert prompt_kernels.applicable(_random_llama(4, 2, 16), torch.bfloat16, cpu) == "float32 only"
    assert "multiple of 16" in prompt_kernels.applicable(_random_llama(4, 2, 24), torch.float32, cpu)
    assert "multiple of 16" in prompt_kernels.applicable(_random_llama(9, 1, 16), torch.float32, cpu)  # 9 per KV head


def _verdict_file(tmp_path, lm, use: bool) -> None:
    key = prompt_kernels.verdict_key(lm.model, lm.dtype)
    verdict = {"use": use, "torch_ms": 4.0, "c_ms": 2.5 if use else 4.5, "build_s": 0.5, "note": ""}
    data = {c_decode._key_id(key): {"key": key, "verdict": verdict}}
    (tmp_path / prompt_kernels.CACHE_FILE).write_text(json.dumps(data))


def test_a_machine_where_they_won_runs_them_for_prompts(plain_llama, tmp_path, building):
    _verdict_file(tmp_path, plain_llama, use=True)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    kernels = fast.model.prompt_kernels
    assert isinstance(kernels, PromptKernels) and fast.kernels.endswith(PROMPT_C_LABEL)
    assert ("prompt attention, norms and SwiGLU in C (C 2.50 ms vs torch 4.00 ms a layer at 512 tokens; cached verdict)"
            in fast.kernel_why)
    assert plain_llama.model.prompt_kernels is None  # the plain model never runs them
    prompt = " ".join(["the valley and the bridge"] * 6)
    checked = kernels.calls  # the check's two prompts
    a = engine.generate(fast, prompt, 6, ignore_eos=True).output_ids
    b = engine.generate(plain_llama, prompt, 6, ignore_eos=True).output_ids
    assert a == b and kernels.calls - checked == plain_llama.config.n_layers  # the prompt's pass, every layer
    assert with_kernels(fast, "plain").model.prompt_kernels is None


def test_a_machine_where_they_lost_keeps_torchs(plain_llama, tmp_path, building, monkeypatch):
    _verdict_file(tmp_path, plain_llama, use=False)
    monkeypatch.setattr(prompt_kernels, "build", lambda *a: pytest.fail("built although they lost here"))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.prompt_kernels is None and PROMPT_C_LABEL not in fast.kernels
    assert "prompt attention, norms and SwiGLU torch's (not in C) (C 4.50 ms vs torch 4.00 ms" in fast.kernel_why


def test_a_first_load_checks_times_and_caches_the_verdict(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setattr(prompt_kernels, "race", lambda model, kernels: (2.0, 3.0))  # C faster (the clock's part)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    (entry,) = [e for e in json.loads((tmp_path / prompt_kernels.CACHE_FILE).read_text()).values()
                if e["key"]["what"] == "C prompt kernels"]
    assert entry["verdict"]["use"] and entry["verdict"]["c_ms"] == 2.0 and entry["verdict"]["build_s"] > 0
    assert isinstance(fast.model.prompt_kernels, PromptKernels) and "measured now" in fast.kernel_why
    monkeypatch.setattr(prompt_kernels, "race", lambda *a: pytest.fail("timed again"))
    again = with_kernels(plain_llama, "fast", tmp_path)  # another process: the cached verdict, checked, not timed
    assert isinstance(again.model.prompt_kernels, PromptKernels) and "cached verdict" in again.kernel_why


@torch.inference_mode()
def test_the_race_times_one_block_both_ways_and_leaves_the_model_as_it_was(library):
    model = _random_llama(9, 3, 64)
    c_ms, torch_ms = prompt_kernels.race(model, PromptKernels(model.cfg, library))
    assert c_ms > 0 and torch_ms > 0 and model.prompt_kernels is None


@torch.inference_mode()
def test_a_model_of_a_shorter_context_is_timed_on_its_whole_context(tmp_path, building):
    """The race's prompt fits the model: a 200-token context is timed at 200 tokens (it once asked for 512 and the
    load failed: the rope tables hold max_seq_len rows)."""
    model = _random_llama(4, 2, 16, max_seq_len=200)
    verdict = prompt_kernels.attach(model, torch.float32, tmp_path)
    assert not verdict.note and verdict.tokens == 200 and verdict.c_ms > 0 and verdict.torch_ms > 0
    assert "a layer at 200 tokens" in verdict.words()
    assert prompt_kernels.applicable(_random_llama(4, 2, 16, max_seq_len=64), torch.float32, torch.device("cpu"))


def test_a_race_that_fails_says_why_and_keeps_torchs(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setattr(prompt_kernels, "race", lambda *a: (_ for _ in ()).throw(RuntimeError("no room")))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.prompt_kernels is None
    assert "prompt kernels not in C: could not time them here (RuntimeError: no room)" in fast.kernel_why


def test_a_failed_build_says_why_and_keeps_torchs(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setattr(prompt_kernels, "build", lambda *a: (_ for _ in ()).throw(RuntimeError("gcc failed: no")))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.prompt_kernels is None
    assert "prompt kernels not in C: could not build them here (RuntimeError: gcc failed: no)" in fast.kernel_why


@torch.inference_mode()
def test_the_real_model_gives_the_same_greedy_tokens(smollm, library):
    """SmolLM2-135M, a 300-token prompt: the same 8 greedy tokens with its prompts' kernels in C."""
    fast, kernels = _with_c(smollm.model, library)
    lm = dataclasses.replace(smollm, model=fast)
    prompt = " ".join(["Two bends on the old post road: the valley and the bridge."] * 25)
    a = engine.generate(lm, prompt, 8, ignore_eos=True)
    b = engine.generate(smollm, prompt, 8, ignore_eos=True)
    assert a.output_ids == b.output_ids and kernels.calls == smollm.config.n_layers


@torch.inference_mode()
def test_the_profiler_sees_each_kernels_time_and_the_prefill_split_names_it(library):
    """No aten op shows the C calls' time: each is a named range while torch.profiler records (and only then)."""
    from engine.labs.prefill_split import categorize

    model = _random_llama(4, 2, 16)
    fast, _ = _with_c(model, library)
    with torch.profiler.profile() as prof:
        fast(_prompt(model, 30, 7), KVCache(model.cfg, 1, 40, torch.float32))
    seen = {e.key: e.count for e in prof.key_averages()}
    assert all(seen.get(mark) == (2 * model.cfg.n_layers if kernel == "rms_norm" else model.cfg.n_layers)
               for kernel, mark in prompt_kernels.MARKS.items())
    assert categorize(prompt_kernels.MARKS["attention"], []).startswith("attention in C")
    assert categorize(prompt_kernels.MARKS["silu_mul"], []) == "MLP SiLU x up in C"


def test_a_machine_where_both_won_runs_the_c_decode_step_after_a_c_prompt(plain_llama, tmp_path, building,
                                                                          monkeypatch):
    """The prompt kernels' model keeps the decode step chosen before it: every step after the prompt runs in C."""
    monkeypatch.setenv(c_decode.SWITCH, "on")
    _verdict_file(tmp_path, plain_llama, use=True)
    step_key = c_decode.verdict_key(plain_llama.model, plain_llama.dtype)
    step_verdict = {"use": True, "rival": "compiled", "rival_ms": 9.0, "c_ms": 7.0, "build_s": 0.5, "note": ""}
    verdicts = json.loads((tmp_path / prompt_kernels.CACHE_FILE).read_text())
    verdicts[c_decode._key_id(step_key)] = {"key": step_key, "verdict": step_verdict}
    (tmp_path / prompt_kernels.CACHE_FILE).write_text(json.dumps(verdicts))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    step = fast.model.compiled_decode
    assert isinstance(fast.model.prompt_kernels, PromptKernels) and isinstance(step, c_decode.CDecode)
    assert fast.kernels.endswith(C_LABEL + PROMPT_C_LABEL)
    calls = []
    fast.model.compiled_decode = lambda *a: calls.append(1) or step(*a)
    prompt = " ".join(["the valley and the bridge"] * 6)
    a = engine.generate(fast, prompt, 6, ignore_eos=True).output_ids
    b = engine.generate(plain_llama, prompt, 6, ignore_eos=True).output_ids
    assert a == b and len(calls) >= 5 and step.fallbacks == 0  # every decode step after the prompt's token, in C
