"""The decode step in C: the eager step's numbers and cache, any cache size and thread count, no address of a cache
kept, its struct layout the C source's, and where it runs (a model's backends, by measurement) or why not."""
import ctypes
import dataclasses
import json

import pytest
import torch

import engine
from engine.core.backends import Backends, run_pass
from engine.core.kv_cache import KVCache
from engine.core.model import Transformer
from engine.techniques import c_build, c_decode, kernels, measured_cache
from engine.techniques.c_decode import C_DECODE_STEP, CDecode
from engine.techniques.kernels import with_kernels, without_decode_step
from tests.engine.techniques.helpers import filled as _filled

pytestmark = pytest.mark.skipif(c_build.toolchain_fit().ok is False, reason="the C kernels cannot be built here")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return c_decode.load(c_build.build(tmp_path_factory.mktemp("c-kernels"), c_decode.SOURCE))


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
def test_a_cache_it_cannot_read_runs_the_eager_loop_and_is_counted(plain_llama, step):
    """run_pass asks the step first: a cache of another dtype or layout never reaches the C code."""
    backends = Backends(decode_step=step)
    before = step.fallbacks
    other = KVCache(plain_llama.config, 1, 40, torch.bfloat16, "cpu")  # another dtype: the eager loop's own error
    assert not step.serves(other, other.plan(1))
    with pytest.raises(RuntimeError):
        run_pass(plain_llama.model, backends, torch.tensor([[7]]), other)
    wide, eager = _filled(plain_llama, 40, rows=2), _filled(plain_llama, 40, rows=2)
    one, eager_one = wide.rows(1, 2), eager.rows(1, 2)  # a row of a batch's cache: each layer's rows in one piece
    assert step.serves(one, one.plan(1))
    torch.testing.assert_close(run_pass(plain_llama.model, backends, torch.tensor([[7]]), one)[0],
                               plain_llama.model.decode_rows(torch.tensor([[7]]), eager_one, eager_one.plan(1)),
                               rtol=1e-4, atol=1e-4)
    assert step.fallbacks == before + 1
    cfg = plain_llama.config
    every_other = [torch.zeros(1, cfg.n_kv_heads, 80, cfg.head_dim)[:, :, ::2] for _ in range(2 * cfg.n_layers)]
    strided = KVCache(cfg, 1, 40, torch.float32, _tensors=(every_other[::2], every_other[1::2]))  # positions apart
    eager_cache = _filled(plain_llama, 40)
    plain_llama.model(torch.arange(9)[None] % cfg.vocab_size, strided)
    want = plain_llama.model.decode_rows(torch.tensor([[7]]), eager_cache, eager_cache.plan(1))
    got = run_pass(plain_llama.model, backends, torch.tensor([[7]]), strided)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # the eager loop ran
    assert step.fallbacks == before + 2 and strided.length == 10


@torch.inference_mode()
def test_no_address_of_a_cache_stays_behind_and_every_other_is_held(plain_llama, step):
    """The C structures hold addresses only of tensors the step holds: the weights, its scratch; a cache's only while
    the call runs."""
    cache = _filled(plain_llama, 40)
    step(torch.tensor([[7]]), cache, cache.plan(1))
    assert all(layer.k is None and layer.v is None for layer in step.layers)
    held = {t.data_ptr() for t in step.pinned._held.values()}
    struct = step.struct
    for name in ("nfinal", "whead", *c_decode.SCRATCH):
        assert getattr(struct, name) in held, name
    for layer in step.layers:
        assert {getattr(layer, name) for name in ("n1", "wqkv", "wout", "n2", "wgu", "wdown")} <= held
    assert not any(t.data_ptr() in held for t in cache.keys + cache.values)


def test_the_structs_ctypes_lays_out_are_the_ones_the_c_source_declares(library):
    """decode_step.c reports sizeof and offsetof of Layer and Model; c_decode.py's ctypes structures must agree
    (a field added on one side only would read the wrong memory)."""
    assert c_decode.layout_in_c(library) == c_decode.expected_layout()
    assert len(c_decode.expected_layout()) == 2 + len(c_decode.LAYER_FIELDS) + len(c_decode.Model._fields_)


def test_a_library_of_another_layout_is_refused_and_removed(tmp_path, monkeypatch):
    path = c_build.build(tmp_path, c_decode.SOURCE)

    class Wider(ctypes.Structure):
        _fields_ = [*c_decode.Layer._fields_, ("extra", ctypes.c_void_p)]

    monkeypatch.setattr(c_decode, "Layer", Wider)
    with pytest.raises(OSError, match="lays out its structures differently"):
        c_decode.load(path)
    assert not path.exists()


def test_a_machine_where_it_wins_runs_it_for_every_batch_one_step(plain_llama, tmp_path):
    """A first load builds it, checks it, times it against the eager loop and keeps the verdict; the next load uses
    the verdict. The model's own modules are never touched; the plain model never runs it."""
    fast = with_kernels(plain_llama, "fast", tmp_path)
    verdict = next(e["record"] for e in json.loads((tmp_path / measured_cache.CACHE_FILE).read_text()).values()
                   if e["key"]["what"] == C_DECODE_STEP.name)
    assert verdict["fast_ms"] > 0 and verdict["rival_ms"] > 0 and not verdict["note"]
    assert isinstance(fast.backends.decode_step, CDecode) == verdict["use"]
    assert list((tmp_path / "c-kernels").glob("decode_step-*.so"))  # built into the model cache, for the next process
    if not verdict["use"]:
        pytest.skip("the C step lost to the eager loop on this machine")
    assert fast.model is plain_llama.model and fast.kernels.endswith(kernels.DECODE_STEP_WORDS["C"])
    again = with_kernels(plain_llama, "fast", tmp_path)
    assert "decode step in C: used" in again.kernel_why and "cached verdict" in again.kernel_why
    step, calls = again.backends.decode_step, []

    class Counted:
        kind, fallbacks = "C", 0

        def serves(self, cache, plan):
            return step.serves(cache, plan)

        def __call__(self, *args):
            calls.append(1)
            return step(*args)

    counted = dataclasses.replace(again, backends=dataclasses.replace(again.backends, decode_step=Counted()))
    a = engine.generate(counted, "hello", 6, ignore_eos=True)
    b = engine.generate(plain_llama, "hello", 6, ignore_eos=True)
    assert a.output_ids == b.output_ids and len(calls) >= 5 and a.env["backends"]["decode_step"] == "C"
    eager = without_decode_step(again)
    assert eager.backends.decode_step is None and "decode step eager" in eager.kernels


@pytest.mark.parametrize("how, said", [
    ("no compiler", "decode step in C: not here (no C compiler here (install gcc, or set CC))"),
    ("clang without OpenMP", "decode step in C: not used (could not build it here: BuildError: clang has no OpenMP"),
    ("an ARM CPU", "decode step in C: not here (the C kernels are written for x86-64 CPUs (AVX2, AVX-512); this one "
                   "is aarch64)"),
])
def test_where_it_cannot_be_built_the_eager_loop_runs_and_one_line_says_why(plain_llama, tmp_path, monkeypatch, how,
                                                                              said):
    monkeypatch.setattr(kernels, "DECODE_STEPS", (C_DECODE_STEP,))  # torch.compile's step has tests of its own
    if how == "no compiler":
        monkeypatch.setenv("CC", "no-such-compiler-two-bends")
    elif how == "clang without OpenMP":  # what Apple's clang says to -fopenmp
        clang = tmp_path / "clang"
        clang.write_text("#!/bin/sh\ncase \"$*\" in *--version*) echo 'Apple clang version 15.0.0';; "
                         "*) echo \"clang: error: unsupported option '-fopenmp'\" >&2; exit 1;; esac\n")
        clang.chmod(0o755)
        monkeypatch.setenv("CC", str(clang))
    else:
        monkeypatch.setattr(c_build.platform, "machine", lambda: "aarch64")
    fast = with_kernels(plain_llama, "fast", tmp_path / "cache")
    assert fast.backends.decode_step is None and said in fast.kernel_why
    assert engine.generate(fast, "hello", 4, ignore_eos=True).output_ids == \
        engine.generate(plain_llama, "hello", 4, ignore_eos=True).output_ids


def test_where_it_cannot_serve_it_says_why(plain_llama, tiny_gpt2):
    def why(lm, **changes):
        return C_DECODE_STEP.fit(dataclasses.replace(lm, **changes), lm.backends)

    assert why(plain_llama).ok and why(plain_llama, dtype=torch.bfloat16).ok
    assert why(plain_llama, dtype=torch.float16).why_not == "float32 and bfloat16 only"
    assert why(plain_llama, device=torch.device("cuda")).why_not == "CPU only"
    assert why(tiny_gpt2).why_not == "Llama family without biases only" and not why(tiny_gpt2).said


def test_an_instruction_set_cap_builds_another_library(tmp_path, monkeypatch):
    """ATEN_CPU_CAPABILITY=avx2 (the emulation of an AVX2-only machine) must not run code built for this CPU's best."""
    native = c_build.build(tmp_path, c_decode.SOURCE)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    capped = c_build.build(tmp_path, c_decode.SOURCE)
    assert capped != native and capped.is_file() and "-march=native" not in c_build.flags()


def test_loading_the_library_leaves_the_threads_floating_point_mode_alone(tmp_path):
    """Linked with -ffast-math, gcc before 13 adds a constructor that flushes denormals to zero in the loading thread:
    torch's own numbers in that thread would change."""
    import subprocess
    import sys

    path = c_build.build(tmp_path, c_decode.SOURCE)
    code = ("import ctypes, sys, torch; tiny = torch.tensor([1e-39]); ctypes.CDLL(sys.argv[1]); "
            "print(float(tiny * 2) > 0)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_a_library_that_cannot_be_loaded_is_removed_and_built_again(tmp_path):
    path = c_build.build(tmp_path, c_decode.SOURCE)
    path.write_bytes(b"not a library")
    with pytest.raises(OSError):
        c_decode.load(path)
    assert not path.exists()
    assert c_decode.load(c_build.build(tmp_path, c_decode.SOURCE)).decode_step_abi() == c_decode.ABI




def test_smollm_c_decode_gives_the_eager_greedy_tokens(smollm, library):
    """SmolLM2, float32, 32 greedy steps at a 400-token context: the C step chooses the tokens the eager loop chooses."""
    model = smollm.model
    step = CDecode(model, library)
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


def test_a_model_of_a_context_shorter_than_the_timed_one_keeps_the_eager_steps(plain_llama):
    """The steps are timed at context CONTEXT: a shorter model cannot be, and says why instead of failing its load."""
    from engine.techniques import step_race
    from engine.techniques.compiled_decode import COMPILED_DECODE_STEP

    cfg = dataclasses.replace(plain_llama.config, max_seq_len=step_race.CONTEXT)
    short = dataclasses.replace(plain_llama, model=Transformer(cfg), config=cfg)
    for path in (C_DECODE_STEP, COMPILED_DECODE_STEP):
        fit = path.fit(short, short.backends)
        assert fit.why_not.startswith(f"models of a context of at least {step_race.CONTEXT + step_race.STEPS + 1}")


def test_a_first_load_builds_the_libraries_in_the_background_once(tmp_path):
    """load_model starts the builds before it reads the weights (c_build.prebuild); the fast path's own build then
    finds the library (or waits for the build under way) instead of compiling again."""
    thread = c_build.prebuild(tmp_path, [c_decode.SOURCE])
    path = c_build.build(tmp_path, c_decode.SOURCE)  # waits for the prebuild's compile, if it is still running
    thread.join()
    (built,) = (tmp_path / "c-kernels").glob("decode_step-*.so")
    assert built == path and built.stat().st_mtime_ns == c_build.build(tmp_path, c_decode.SOURCE).stat().st_mtime_ns
