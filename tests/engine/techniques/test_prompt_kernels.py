"""The prompt's kernels in C (attention, norms, SwiGLU): torch's logits and cache for any prompt, on top of a cached
prefix, any thread count and head shape; torch's ops wherever they cannot serve; a measured, cached verdict that
decides whether they run."""
import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch

import engine
from engine.core.backends import EAGER, TORCH, Backends, run_pass
from engine.core.config import ModelConfig
from engine.core.kv_cache import KVCache
from engine.core.model import Transformer
from engine.techniques import c_build, kernels, measured_cache, prompt_kernels
from engine.techniques.c_decode import C_DECODE_STEP, CDecode
from engine.techniques.fast_paths import decide
from engine.techniques.kernels import with_kernels
from engine.techniques.prompt_kernels import C_PROMPT_KERNELS, CPromptOps
from tests.engine.techniques.helpers import write_verdict

pytestmark = pytest.mark.skipif(c_build.toolchain_fit().ok is False, reason="the C kernels cannot be built here")
WORDS = "prompts' attention, norms and SwiGLU in C"


@pytest.fixture
def prompts_only(monkeypatch):
    """The prompts' C kernels the only fast path but the matmuls (the decode steps have tests of their own)."""
    monkeypatch.setattr(kernels, "DECODE_STEPS", ())


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return prompt_kernels.load(c_build.build(tmp_path_factory.mktemp("c-kernels"), prompt_kernels.SOURCE))


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
        return prompt_kernels.load(c_build.build(tmp_path_factory.mktemp("c-kernels-avx2"), prompt_kernels.SOURCE))


def _random_llama(n_heads: int, n_kv_heads: int, head_dim: int, max_seq_len: int = 1200) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(arch="llama", vocab_size=300, n_layers=2, d_model=n_heads * head_dim, n_heads=n_heads,
                      n_kv_heads=n_kv_heads, head_dim=head_dim, d_ff=96, max_seq_len=max_seq_len, norm_eps=1e-5,
                      tie_embeddings=True)
    model = Transformer(cfg).eval().requires_grad_(False)  # its tensors made, not filled: random numbers here
    for name, weight in model.named_parameters():
        weight.uniform_(0.5, 1.5) if name.endswith("norm.weight") else weight.normal_(0, 0.3)
    return model


def _with_c(model: Transformer, library):
    """(a forward through the C prompt ops where they serve, those ops): the same model, other backends."""
    ops = CPromptOps(model.cfg, library, TORCH)
    backends = Backends(prompt_ops=ops, flat_decode=False)
    return (lambda ids, cache, **kw: run_pass(model, backends, ids, cache, **kw)), ops


def _lm(model: Transformer) -> SimpleNamespace:
    """What a fast path reads of a loaded model."""
    return SimpleNamespace(model=model, dtype=torch.float32, device=torch.device("cpu"), config=model.cfg)


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
    assert C_PROMPT_KERNELS.check(_lm(model), EAGER, CPromptOps(model.cfg, library, TORCH))
    off = CPromptOps(model.cfg, library, TORCH)
    right = getattr(off, {"rms_norm": "_rms_norm"}.get(kernel, kernel))
    setattr(off, {"rms_norm": "_rms_norm"}.get(kernel, kernel), lambda *args, **kw: right(*args, **kw) * 1.001)
    assert not C_PROMPT_KERNELS.check(_lm(model), EAGER, off)


def test_float32_on_cpu_with_heads_of_a_multiple_of_16_only():
    def why(model, dtype=torch.float32):
        return C_PROMPT_KERNELS.fit(SimpleNamespace(model=model, dtype=dtype, device=torch.device("cpu")), EAGER)

    assert why(_random_llama(4, 2, 16)).ok
    assert why(_random_llama(4, 2, 16), torch.bfloat16).why_not == "float32 only"
    assert "multiple of 16" in why(_random_llama(4, 2, 24)).why_not
    assert "multiple of 16" in why(_random_llama(9, 1, 16)).why_not  # 9 query heads per KV head


def test_a_machine_where_they_won_runs_them_for_prompts(plain_llama, tmp_path, prompts_only):
    write_verdict(tmp_path, plain_llama, C_PROMPT_KERNELS, use=True, fast_ms=2.5, rival_ms=4.0)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    ops = fast.backends.prompt_ops
    assert isinstance(ops, CPromptOps) and fast.kernels.endswith(WORDS)
    assert f"{WORDS}: used (C 2.50 ms vs torch 4.00 ms a layer at 256 tokens; cached verdict" in fast.kernel_why
    assert plain_llama.backends.prompt_ops is None  # the plain model never runs them
    prompt = " ".join(["the valley and the bridge"] * 6)
    checked = ops.calls  # the check's two prompts
    a = engine.generate(fast, prompt, 6, ignore_eos=True)
    b = engine.generate(plain_llama, prompt, 6, ignore_eos=True)
    assert a.output_ids == b.output_ids and ops.calls - checked == plain_llama.config.n_layers  # the prompt's pass
    assert a.env["backends"]["prompt_ops"] == "C" and b.env["backends"]["prompt_ops"] == "torch"
    assert with_kernels(fast, "plain").backends.prompt_ops is None


def test_a_machine_where_they_lost_keeps_torchs(plain_llama, tmp_path, prompts_only, monkeypatch):
    write_verdict(tmp_path, plain_llama, C_PROMPT_KERNELS, use=False, fast_ms=4.5, rival_ms=4.0)
    monkeypatch.setattr(c_build, "build", lambda *a: pytest.fail("built although they lost here"))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.backends.prompt_ops is None and WORDS not in fast.kernels
    assert f"{WORDS}: not used (C 4.50 ms vs torch 4.00 ms" in fast.kernel_why


def test_a_first_load_checks_times_and_caches_the_verdict(plain_llama, tmp_path, prompts_only, monkeypatch):
    monkeypatch.setattr(type(C_PROMPT_KERNELS), "race", lambda *a: (2.0, 3.0))  # C faster (the clock's part)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    (record,) = [e["record"] for e in json.loads((tmp_path / measured_cache.CACHE_FILE).read_text()).values()
                 if e["key"]["what"] == C_PROMPT_KERNELS.name]
    assert record["use"] and record["fast_ms"] == 2.0 and record["setup_s"] > 0
    assert isinstance(fast.backends.prompt_ops, CPromptOps) and "measured now" in fast.kernel_why
    monkeypatch.setattr(type(C_PROMPT_KERNELS), "race", lambda *a: pytest.fail("timed again"))
    again = with_kernels(plain_llama, "fast", tmp_path)  # another process: the cached verdict, checked, not timed
    assert isinstance(again.backends.prompt_ops, CPromptOps) and "cached verdict" in again.kernel_why


@torch.inference_mode()
def test_the_race_times_one_block_both_ways(library):
    model = _random_llama(9, 3, 64)
    c_ms, torch_ms = C_PROMPT_KERNELS.race(_lm(model), EAGER, CPromptOps(model.cfg, library, TORCH))
    assert c_ms > 0 and torch_ms > 0


@torch.inference_mode()
def test_a_model_of_a_shorter_context_is_timed_on_its_whole_context(tmp_path):
    """The race's prompt fits the model: a 200-token context is timed at 200 tokens (it once asked for 512 and the
    load failed: the rope tables hold max_seq_len rows)."""
    lm = _lm(_random_llama(4, 2, 16, max_seq_len=200))
    _, verdict = decide(C_PROMPT_KERNELS, lm, EAGER, tmp_path)
    assert not verdict.note and verdict.fast_ms > 0 and verdict.rival_ms > 0
    assert "a layer at 200 tokens" in verdict.words(C_PROMPT_KERNELS)
    assert not C_PROMPT_KERNELS.fit(_lm(_random_llama(4, 2, 16, max_seq_len=64)), EAGER).ok


@torch.inference_mode()
def test_the_real_model_gives_the_same_greedy_tokens(smollm, library):
    """SmolLM2-135M, a 300-token prompt: the same 8 greedy tokens with its prompts' kernels in C."""
    ops = CPromptOps(smollm.config, library, smollm.backends.ops)
    lm = dataclasses.replace(smollm, backends=dataclasses.replace(smollm.backends, prompt_ops=ops))
    prompt = " ".join(["Two bends on the old post road: the valley and the bridge."] * 25)
    a = engine.generate(lm, prompt, 8, ignore_eos=True)
    b = engine.generate(dataclasses.replace(smollm, backends=EAGER), prompt, 8, ignore_eos=True)
    assert a.output_ids == b.output_ids and ops.calls == smollm.config.n_layers


@torch.inference_mode()
def test_the_profiler_sees_each_kernels_time(library):
    """No aten op shows the C calls' time: each is a named range while torch.profiler records (and only then)."""
    model = _random_llama(4, 2, 16)
    fast, _ = _with_c(model, library)
    with torch.profiler.profile() as prof:
        fast(_prompt(model, 30, 7), KVCache(model.cfg, 1, 40, torch.float32))
    seen = {e.key: e.count for e in prof.key_averages()}
    assert all(seen.get(mark) == (2 * model.cfg.n_layers if kernel == "rms_norm" else model.cfg.n_layers)
               for kernel, mark in prompt_kernels.MARKS.items())


def test_a_machine_where_both_won_runs_the_c_decode_step_after_a_c_prompt(plain_llama, tmp_path):
    """The prompts' C kernels and the C decode step, both chosen: the prompt's pass in C, every step after it in C."""
    write_verdict(tmp_path, plain_llama, C_PROMPT_KERNELS, use=True, fast_ms=2.5, rival_ms=4.0)
    write_verdict(tmp_path, plain_llama, C_DECODE_STEP, use=True)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    step, ops = fast.backends.decode_step, fast.backends.prompt_ops
    assert isinstance(ops, CPromptOps) and isinstance(step, CDecode)
    assert fast.kernels.endswith(f"{WORDS}; {kernels.DECODE_STEP_WORDS['C']}")
    prompt = " ".join(["the valley and the bridge"] * 6)
    a = engine.generate(fast, prompt, 6, ignore_eos=True)
    b = engine.generate(plain_llama, prompt, 6, ignore_eos=True)
    assert a.output_ids == b.output_ids and step.fallbacks == 0
    assert a.env["backends"]["decode_step"] == "C" and a.env["backends"]["prompt_ops"] == "C"
