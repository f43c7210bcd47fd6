"""The decode step in C: the eager step's numbers and cache, any cache size and thread count, eager where it cannot
read a cache, and a measured, cached verdict that decides whether it runs."""
import json

import pytest
import torch

import engine
from engine.core.kv_cache import KVCache
from engine.techniques import c_decode, compiled_decode
from engine.techniques.c_decode import CDecode, Verdict
from engine.techniques.kernels import C_LABEL, with_kernels, without_compiled_decode
from tests.engine.techniques.test_compiled_decode import _filled

pytestmark = pytest.mark.skipif(c_decode.c_compiler() is None, reason="no C compiler (gcc) on this machine")


@pytest.fixture
def building(monkeypatch):
    """The suite switches the C step off (conftest.py); these tests switch it back on (torch.compile's stays off)."""
    monkeypatch.setenv(c_decode.SWITCH, "on")
    monkeypatch.setenv(compiled_decode.SWITCH, "off")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return c_decode.load(c_decode.build(tmp_path_factory.mktemp("c-decode")))


@pytest.fixture(scope="module")
def step(plain_llama, library):
    return CDecode(plain_llama.model, library)


@torch.inference_mode()
def test_c_steps_give_the_eager_steps_logits_and_cache(plain_llama, step):
    cfg = plain_llama.config
    assert cfg.n_heads > cfg.n_kv_heads  # grouped queries: each KV head read once for several query heads
    model = plain_llama.model
    eager_cache, c_cache = _filled(plain_llama, 40), _filled(plain_llama, 40)
    token = torch.tensor([[3]])
    for _ in range(8):
        want = model.decode_rows(token, eager_cache, eager_cache.plan(1))  # (1, V)
        got = step(token, c_cache, c_cache.plan(1))  # (1, V)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        token = want.argmax(-1, keepdim=True)  # (1, 1)
    assert c_cache.length == eager_cache.length == 17 and step.fallbacks == 0
    for layer in range(cfg.n_layers):
        for c, e in ((c_cache.keys[layer], eager_cache.keys[layer]), (c_cache.values[layer], eager_cache.values[layer])):
            torch.testing.assert_close(c[:, :, :17], e[:, :, :17], rtol=1e-4, atol=1e-5)
            assert not c[:, :, 17:].any()  # nothing written past the step's position


@pytest.mark.parametrize("threads", [1, 2, 3])
@torch.inference_mode()
def test_any_cache_size_length_and_thread_count_gives_the_same_numbers(plain_llama, step, threads):
    """The positions are split between the threads and joined by their softmax sums: with more threads than positions
    some parts are empty; caches of other sizes give other strides (the scratch grows for a bigger one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for max_len, prompt_len in ((3, 1), (40, 9), (300, 200), (12, 11), (40, 2)):
            eager, cache = _filled(plain_llama, max_len, prompt_len), _filled(plain_llama, max_len, prompt_len)
            torch.testing.assert_close(step(torch.tensor([[5]]), cache, cache.plan(1)),
                                       plain_llama.model.decode_rows(torch.tensor([[5]]), eager, eager.plan(1)),
                                       rtol=1e-4, atol=1e-4)
    finally:
        torch.set_num_threads(before)
    assert step.fallbacks == 0


def _random_llama(head_dim: int, d_ff: int, tied: bool, dtype=torch.float32):
    from engine.core.config import ModelConfig
    from engine.core.model import Transformer

    torch.manual_seed(0)
    cfg = ModelConfig(arch="llama", vocab_size=300, n_layers=2, d_model=2 * head_dim, n_heads=2, n_kv_heads=1,
                      head_dim=head_dim, d_ff=d_ff, max_seq_len=128, norm_eps=1e-5, tie_embeddings=tied)
    model = Transformer(cfg).eval()  # its tensors made, not filled (a checkpoint fills them): random numbers here
    for name, weight in model.named_parameters():
        weight.uniform_(0.5, 1.5) if name.endswith("norm.weight") else weight.normal_(0, 0.3)  # norms not all ones
    return model.to(dtype)


@pytest.mark.parametrize("head_dim", [64, 16])
@torch.inference_mode()
def test_bfloat16_weights_and_cache_are_read_as_their_float32_values(library, head_dim):
    """The same model in bfloat16 and in float32 holding exactly the bfloat16 numbers: the C step gives the same
    logits but for the bfloat16 cache's rounding (its new entries rounded as torch rounds), and close to the eager
    bfloat16 step (which also rounds every activation)."""
    half = _random_llama(head_dim, 72, tied=head_dim == 64, dtype=torch.bfloat16)
    full = _random_llama(head_dim, 72, tied=head_dim == 64).to(torch.float32)
    full.load_state_dict({k: v.float() for k, v in half.state_dict().items()})
    steps = {"half": CDecode(half, library), "full": CDecode(full, library)}
    caches = {name: KVCache(half.cfg, 1, 64, dtype, "cpu") for name, dtype in
              (("half", torch.bfloat16), ("full", torch.float32), ("eager", torch.bfloat16))}
    prompt = torch.arange(23)[None] * 5 % 300
    half(prompt, caches["half"]), half(prompt, caches["eager"])
    for kind in ("keys", "values"):  # the float32 model starts from the same prompt's cache, widened
        for c, h in zip(getattr(caches["full"], kind), getattr(caches["half"], kind)):
            c.copy_(h.float())
    caches["full"].lengths[:] = caches["half"].lengths
    for token in (3, 250, 17, 99):
        ids = torch.tensor([[token]])
        got = steps["half"](ids, caches["half"], caches["half"].plan(1))
        scale = float(got.abs().max())
        wide = steps["full"](ids, caches["full"], caches["full"].plan(1))
        eager = half.decode_rows(ids, caches["eager"], caches["eager"].plan(1)).float()
        assert float((got - wide).abs().max()) < 2e-2 * scale
        assert float((got - eager).abs().max()) < 5e-2 * scale
    n = caches["half"].length
    for layer in range(half.cfg.n_layers):
        for kind in ("keys", "values"):
            c, e = getattr(caches["half"], kind)[layer], getattr(caches["eager"], kind)[layer]
            assert c.dtype == torch.bfloat16
            c, e = c[:, :, :n].float(), e[:, :, :n].float()  # the eager step rounds its activations: a few ulps apart
            assert float((c - e).abs().max()) <= 2e-2 * float(e.abs().max())
    assert steps["half"].fallbacks == 0 and steps["full"].fallbacks == 0


@pytest.mark.parametrize("head_dim, d_ff, tied", [(64, 100, True), (24, 96, False), (10, 33, True)])
@torch.inference_mode()
def test_other_shapes_take_the_other_loops_and_give_the_same_numbers(library, head_dim, d_ff, tied):
    """Heads of 64 dims (the registers' path), of a multiple of 8 and of neither; rows not a multiple of 32 floats;
    positions not a multiple of 4; a head of its own or tied to the embedding."""
    model = _random_llama(head_dim, d_ff, tied)
    cfg = model.cfg
    step = CDecode(model, library)
    for prompt_len in (1, 6, 41):
        caches = [KVCache(cfg, 1, 64, torch.float32, "cpu") for _ in range(2)]
        for cache in caches:
            model(torch.arange(prompt_len)[None] * 7 % cfg.vocab_size, cache)
        for token in (3, 250):
            want = model.decode_rows(torch.tensor([[token]]), caches[0], caches[0].plan(1))
            got = step(torch.tensor([[token]]), caches[1], caches[1].plan(1))
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert step.fallbacks == 0


@torch.inference_mode()
def test_a_cache_it_cannot_read_runs_eager_and_is_counted(plain_llama, step):
    before = step.fallbacks
    for rows, dtype in ((2, plain_llama.dtype), (1, torch.bfloat16)):  # never read as if it were its own layout:
        other = KVCache(plain_llama.config, rows, 40, dtype, "cpu")  # the eager loop's own error, not wrong memory
        with pytest.raises(RuntimeError):
            step(torch.tensor([[7]]), other, other.plan(1))
    wide, eager = _filled(plain_llama, 40, rows=2), _filled(plain_llama, 40, rows=2)
    one, eager_one = wide.rows(1, 2), eager.rows(1, 2)  # a row of a batch's cache: each layer's rows in one piece
    torch.testing.assert_close(step(torch.tensor([[7]]), one, one.plan(1)),
                               plain_llama.model.decode_rows(torch.tensor([[7]]), eager_one, eager_one.plan(1)),
                               rtol=1e-4, atol=1e-4)
    assert step.fallbacks == before + 2
    cfg = plain_llama.config
    every_other = [torch.zeros(1, cfg.n_kv_heads, 80, cfg.head_dim)[:, :, ::2] for _ in range(2 * cfg.n_layers)]
    strided = KVCache(cfg, 1, 40, torch.float32, _tensors=(every_other[::2], every_other[1::2]))  # positions apart
    eager_cache = _filled(plain_llama, 40)
    with torch.inference_mode():
        plain_llama.model(torch.arange(9)[None] % cfg.vocab_size, strided)
    want = plain_llama.model.decode_rows(torch.tensor([[7]]), eager_cache, eager_cache.plan(1))
    torch.testing.assert_close(step(torch.tensor([[7]]), strided, strided.plan(1)), want, rtol=0, atol=0)  # eager ran
    assert step.fallbacks == before + 3 and strided.length == 10


def _verdict_file(tmp_path, lm, use: bool) -> None:
    key = c_decode.verdict_key(lm.model, lm.dtype)
    verdict = {"use": use, "rival": "compiled", "rival_ms": 9.0, "c_ms": 7.0 if use else 9.5, "build_s": 0.5, "note": ""}
    data = {c_decode._key_id(key): {"key": key, "verdict": verdict}}
    (tmp_path / c_decode.CACHE_FILE).write_text(json.dumps(data))


def test_a_machine_where_it_won_runs_it_and_never_compiles_the_other_step(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setenv(compiled_decode.SWITCH, "on")
    _verdict_file(tmp_path, plain_llama, use=True)
    monkeypatch.setattr(compiled_decode, "attach", lambda *a, **k: pytest.fail("torch.compile's layer built anyway"))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert isinstance(fast.model.compiled_decode, CDecode) and fast.kernels.endswith(C_LABEL)
    assert "C 7.0 ms vs compiled 9.0 ms" in fast.kernel_why and "cached verdict" in fast.kernel_why
    assert plain_llama.model.compiled_decode is None  # the plain model never runs it
    calls = []
    step = fast.model.compiled_decode
    fast.model.compiled_decode = lambda *a: calls.append(1) or step(*a)
    a = engine.generate(fast, "hello", 6, ignore_eos=True).output_ids
    b = engine.generate(plain_llama, "hello", 6, ignore_eos=True).output_ids
    assert a == b and len(calls) >= 5  # every decode step after the prefill's token
    eager = without_compiled_decode(fast)
    assert eager.model.compiled_decode is None and C_LABEL not in eager.kernels


def test_a_machine_where_it_lost_never_builds_it(plain_llama, tmp_path, building, monkeypatch):
    _verdict_file(tmp_path, plain_llama, use=False)
    monkeypatch.setattr(c_decode, "build", lambda folder: pytest.fail("built although it lost here"))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.compiled_decode is None and C_LABEL not in fast.kernels
    assert "decode step compiled, not in C (C 9.5 ms vs compiled 9.0 ms" in fast.kernel_why


def test_a_first_load_checks_times_and_caches_the_verdict(plain_llama, tmp_path, building):
    fast = with_kernels(plain_llama, "fast", tmp_path)
    (entry,) = json.loads((tmp_path / c_decode.CACHE_FILE).read_text()).values()
    verdict = entry["verdict"]
    assert verdict["rival"] == "eager" and verdict["c_ms"] > 0 and verdict["rival_ms"] > 0 and not verdict["note"]
    assert "measured now" in fast.kernel_why and entry["key"]["what"] == "C decode step"
    assert isinstance(fast.model.compiled_decode, CDecode) == verdict["use"]
    assert list((tmp_path / "c-decode").glob("decode_step-*.so"))  # built into the model cache, for the next process


def test_a_build_that_fails_leaves_the_other_step_and_says_why(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a compiler that exits 1
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.compiled_decode is None
    assert "decode step not in C: could not build it here (RuntimeError: false failed" in fast.kernel_why
    assert not (tmp_path / c_decode.CACHE_FILE).exists()  # a failure is not a measurement: try again next time


def test_a_step_with_other_logits_is_refused_and_the_refusal_cached(plain_llama, tmp_path, building, monkeypatch):
    monkeypatch.setattr(c_decode, "check", lambda model, step: False)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.model.compiled_decode is None and "its logits differed from the eager step's" in fast.kernel_why
    (entry,) = json.loads((tmp_path / c_decode.CACHE_FILE).read_text()).values()
    assert entry["verdict"]["use"] is False


def test_where_it_cannot_serve_it_says_why(plain_llama, tiny_gpt2, monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setenv(c_decode.SWITCH, "off")
    assert "switched off" in c_decode.applicable(plain_llama.model, torch.float32, cpu)
    monkeypatch.setenv(c_decode.SWITCH, "on")
    assert c_decode.applicable(plain_llama.model, torch.float32, cpu) == ""
    assert c_decode.applicable(plain_llama.model, torch.bfloat16, cpu) == ""
    assert c_decode.applicable(plain_llama.model, torch.float16, cpu) == "float32 and bfloat16 only"
    assert c_decode.applicable(plain_llama.model, torch.float32, torch.device("cuda")) == "CPU only"
    assert c_decode.applicable(tiny_gpt2.model, torch.float32, cpu) == "Llama family without biases only"
    monkeypatch.setenv("CC", "no-such-compiler-two-bends")
    assert c_decode.applicable(plain_llama.model, torch.float32, cpu).startswith("no C compiler here")


def test_an_instruction_set_cap_builds_another_library(tmp_path, monkeypatch):
    """ATEN_CPU_CAPABILITY=avx2 (the emulation of an AVX2-only machine) must not run code built for this CPU's best."""
    native = c_decode.build(tmp_path)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    capped = c_decode.build(tmp_path)
    assert capped != native and capped.is_file() and "-march=native" not in c_decode._flags()


def test_loading_the_library_leaves_the_threads_floating_point_mode_alone(tmp_path):
    """Linked with -ffast-math, gcc before 13 adds a constructor that flushes denormals to zero in the loading thread:
    torch's own numbers in that thread would change."""
    import subprocess
    import sys

    path = c_decode.build(tmp_path)
    code = ("import ctypes, sys, torch; tiny = torch.tensor([1e-39]); ctypes.CDLL(sys.argv[1]); "
            "print(float(tiny * 2) > 0)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_a_library_that_cannot_be_loaded_is_removed_and_built_again(tmp_path):
    path = c_decode.build(tmp_path)
    path.write_bytes(b"not a library")
    with pytest.raises(OSError):
        c_decode.load(path)
    assert not path.exists()
    assert c_decode.load(c_decode.build(tmp_path)).decode_step_abi() == c_decode.ABI


def test_verdict_words_say_what_runs():
    assert Verdict(True, "compiled", 14.0, 11.0, 0.6).words() == (
        "decode step in C, one OpenMP region a step (C 11.0 ms vs compiled 14.0 ms per step at context 128; "
        "measured now; building and checking took 0.6 s)")
    assert Verdict(False, "", 0, 0, 0, note="no gcc").words() == "decode step not in C: no gcc"


def test_smollm_c_decode_gives_the_eager_greedy_tokens(smollm, tmp_path):
    """SmolLM2, float32, 32 greedy steps at a 400-token context: the C step chooses the tokens the eager loop chooses."""
    model = with_kernels(smollm, "plain").model
    step = CDecode(model, c_decode.load(c_decode.build(tmp_path)))
    text = "The two phases of LLM inference are prefill and decode. " * 40
    ids = torch.tensor([smollm.tokenizer.encode(text)[:400]])
    with torch.inference_mode():
        for use in (False, True):
            cache = KVCache(smollm.config, 1, 440, smollm.dtype, "cpu")
            token = model(ids, cache)[0].argmax(-1, keepdim=True)  # (1, 1)
            tokens = []
            for _ in range(32):
                logits = step(token, cache, cache.plan(1)) if use else model.decode_rows(token, cache, cache.plan(1))
                token = logits.argmax(-1, keepdim=True)
                tokens.append(int(token))
            if not use:
                eager = tokens
    assert tokens == eager and step.fallbacks == 0


def test_a_model_of_a_context_shorter_than_the_timed_one_keeps_the_eager_steps(building, monkeypatch):
    """The steps are timed at context CONTEXT: a shorter model cannot be, and says why instead of failing its load."""
    monkeypatch.setenv(compiled_decode.SWITCH, "on")
    from engine.core.config import ModelConfig
    from engine.core.model import Transformer

    cfg = ModelConfig(arch="llama", vocab_size=300, n_layers=1, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16,
                      d_ff=96, max_seq_len=compiled_decode.CONTEXT, norm_eps=1e-5, tie_embeddings=True)
    short = Transformer(cfg)
    for reason in (c_decode.applicable(short, torch.float32, torch.device("cpu")),
                   compiled_decode.applicable(short, torch.device("cpu"))):
        assert reason.startswith(f"models of a context of at least {compiled_decode.CONTEXT + compiled_decode.STEPS + 1}")
