"""The compiled decode step: the eager step's numbers, one compile for every cache, a measured and cached verdict.
It is the second decode-step candidate (the C step is tried first): here it is the only one (`compiled_only`)."""
import dataclasses
import json
import os

import pytest
import torch

import engine
from engine.core.backends import EAGER, Backends, run_pass
from engine.core.kv_cache import KVCache
from engine.techniques import compiled_decode, kernels, measured_cache
from engine.techniques.compiled_decode import COMPILED_DECODE_STEP, CompiledDecode
from engine.techniques.kernels import with_kernels, without_decode_step
from tests.engine.techniques.helpers import filled as _filled
from tests.engine.techniques.helpers import write_verdict


@pytest.fixture(autouse=True)
def inductor_folder_put_back(monkeypatch):
    """The path's build sets TORCHINDUCTOR_CACHE_DIR (beside the model cache: here a test's tmp folder): put it back."""
    name = "TORCHINDUCTOR_CACHE_DIR"
    previous = os.environ.get(name)
    monkeypatch.setenv(name, previous or "unset")
    if previous is None:
        monkeypatch.delenv(name)


@pytest.fixture
def compiled_only(monkeypatch):
    """torch.compile's step the only decode-step candidate, and no prompt paths (tests of their own)."""
    monkeypatch.setattr(kernels, "DECODE_STEPS", (COMPILED_DECODE_STEP,))
    monkeypatch.setattr(kernels, "PROMPT_PATHS", ())


@pytest.fixture(scope="module")
def compiled(plain_llama):
    return CompiledDecode(plain_llama.model)


class Counted:
    """A decode step that counts its calls (its kind and whether it serves are the wrapped step's)."""

    def __init__(self, step):
        self.step, self.kind, self.fallbacks, self.calls = step, step.kind, 0, 0

    def serves(self, cache, plan):
        return self.step.serves(cache, plan)

    def __call__(self, *args):
        self.calls += 1
        return self.step(*args)


def counted(lm):
    step = Counted(lm.backends.decode_step)
    return dataclasses.replace(lm, backends=dataclasses.replace(lm.backends, decode_step=step)), step


@torch.inference_mode()
def test_compiled_steps_give_the_eager_steps_logits_and_cache(plain_llama, compiled):
    model = plain_llama.model
    eager_cache, compiled_cache = _filled(plain_llama, 40), _filled(plain_llama, 40)
    token = torch.tensor([[3]])
    for _ in range(6):
        want = model.decode_rows(token, eager_cache, eager_cache.plan(1))  # (1, V)
        got = compiled(token, compiled_cache, compiled_cache.plan(1))  # (1, V)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        token = want.argmax(-1, keepdim=True)  # (1, 1)
    assert compiled_cache.length == eager_cache.length == 15
    for layer in range(plain_llama.config.n_layers):
        torch.testing.assert_close(compiled_cache.keys[layer][:, :, :15], eager_cache.keys[layer][:, :, :15], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(compiled_cache.values[layer][:, :, :15], eager_cache.values[layer][:, :, :15], rtol=1e-4, atol=1e-5)


def test_one_compile_serves_caches_of_every_size_and_length_without_entering_dynamo(plain_llama, compiled):
    """After the first step, steps call the generated code directly: dynamo sees no frame (no guards, no compile)."""
    from torch._dynamo.utils import counters

    token = torch.tensor([[5]])
    sizes = ((40, 9), (64, 30), (17, 3), (200, 120), (12, 11))  # the last read to its end: a contiguous view
    pairs = []
    for n, (max_len, prompt_len) in enumerate(sizes):
        with torch.inference_mode(n % 2 == 0):  # caches made in inference mode or not: one compiled layer
            pairs.append((_filled(plain_llama, max_len, prompt_len), _filled(plain_llama, max_len, prompt_len)))
    with torch.inference_mode():
        first = _filled(plain_llama, 40, 9)
        compiled(token, first, first.plan(1))
        frames = sum(counters["frames"].values())
        for cache, eager in pairs:
            torch.testing.assert_close(compiled(token, cache, cache.plan(1)),
                                       plain_llama.model.decode_rows(token, eager, eager.plan(1)), rtol=1e-4, atol=1e-4)
    assert sum(counters["frames"].values()) == frames and compiled.fallbacks == 0


@torch.inference_mode()
def test_a_cache_it_was_not_compiled_for_runs_eager_and_is_counted(plain_llama, compiled, monkeypatch):
    cache = _filled(plain_llama, 40)
    compiled(torch.tensor([[7]]), cache, cache.plan(1))  # compiled (if not yet)
    before = compiled.fallbacks
    other = KVCache(plain_llama.config, 1, 40, torch.bfloat16, "cpu")  # not the engine's, but never read as if it were:
    assert not compiled.serves(other, other.plan(1))
    with pytest.raises(RuntimeError):  # the eager loop's own error, not wrong memory
        run_pass(plain_llama.model, Backends(decode_step=compiled), torch.tensor([[7]]), other)
    assert compiled.fallbacks == before + 1

    def refused(*args):  # what the generated code's own size/stride check raises
        raise AssertionError("expected size 3==3, stride 64==128 at dim=1")
    monkeypatch.setattr(compiled, "layer", refused)
    eager_cache, cache = _filled(plain_llama, 40), _filled(plain_llama, 40)
    want = plain_llama.model.decode_rows(torch.tensor([[7]]), eager_cache, eager_cache.plan(1))
    got = compiled(torch.tensor([[7]]), cache, cache.plan(1))
    assert compiled.fallbacks == before + 2
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # the eager loop itself ran
    assert cache.length == eager_cache.length


@torch.inference_mode()
def test_each_model_compiles_its_own_layer(plain_llama, compiled):
    """dynamo keeps compiled code per code object: a second step object of the same shape must still get code to call."""
    cache = _filled(plain_llama, 40)
    compiled(torch.tensor([[7]]), cache, cache.plan(1))
    again = CompiledDecode(plain_llama.model)
    assert again.source.__code__ is not compiled.source.__code__
    cache = _filled(plain_llama, 40)
    again(torch.tensor([[7]]), cache, cache.plan(1))
    assert again.layer is not None and again.fallbacks == 0


def test_a_machine_where_it_won_compiles_and_decodes_through_it(plain_llama, tmp_path, compiled_only):
    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=True)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert isinstance(fast.backends.decode_step, CompiledDecode)
    assert "decode step compiled" in fast.kernels and "compiled 7.00 ms vs eager 9.00 ms" in fast.kernel_why
    assert "cached verdict" in fast.kernel_why and plain_llama.backends.decode_step is None
    fast, step = counted(fast)
    a = engine.generate(fast, "hello", 6, ignore_eos=True).output_ids
    b = engine.generate(plain_llama, "hello", 6, ignore_eos=True).output_ids
    assert a == b and step.calls >= 5  # every decode step after the prefill's token (and the warm-up's)
    assert with_kernels(fast, "plain").backends.decode_step is None


def test_a_machine_where_it_lost_never_compiles(plain_llama, tmp_path, compiled_only, monkeypatch):
    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=False, fast_ms=9.5)
    monkeypatch.setattr(compiled_decode, "CompiledDecode", lambda *a: pytest.fail("compiled although it lost here"))
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.backends.decode_step is None
    assert "decode step compiled (torch.compile): not used (compiled 9.50 ms vs eager 9.00 ms" in fast.kernel_why


def test_a_first_load_measures_and_caches_the_verdict(plain_llama, tmp_path, compiled_only):
    fast = with_kernels(plain_llama, "fast", tmp_path)
    entries = json.loads((tmp_path / measured_cache.CACHE_FILE).read_text()).values()
    (record,) = [e["record"] for e in entries if e["key"]["what"] == COMPILED_DECODE_STEP.name]
    assert record["fast_ms"] > 0 and record["rival_ms"] > 0 and "measured now" in fast.kernel_why
    assert (fast.backends.decode_step is not None) == record["use"]


def test_a_compile_that_fails_leaves_the_eager_loop_and_says_why(plain_llama, tmp_path, compiled_only, monkeypatch):
    def broken(*args):
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(CompiledDecode, "_compile", broken)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.backends.decode_step is None
    assert "not used (could not build it here: RuntimeError: no C++ compiler)" in fast.kernel_why
    assert not (tmp_path / measured_cache.CACHE_FILE).read_text().count(COMPILED_DECODE_STEP.name)  # not a measurement


def test_without_a_cpp_compiler_nothing_is_compiled_and_the_kernels_say_why(plain_llama, tmp_path, compiled_only,
                                                                             monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-two-bends")
    monkeypatch.setattr(compiled_decode, "CompiledDecode", lambda *a: pytest.fail("compiled without a compiler"))
    fit = COMPILED_DECODE_STEP.fit(plain_llama, plain_llama.backends)
    assert not fit.ok and fit.why_not == compiled_decode.NO_COMPILER and fit.said
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.backends.decode_step is None and "compiled" not in fast.kernels
    assert fast.kernel_why.endswith(f"decode step compiled (torch.compile): not here ({compiled_decode.NO_COMPILER})")


def test_where_it_cannot_serve_it_says_why(plain_llama, tiny_gpt2):
    assert COMPILED_DECODE_STEP.fit(tiny_gpt2, EAGER).why_not == "Llama family without biases only"
    cuda = dataclasses.replace(plain_llama, device=torch.device("cuda"))
    assert COMPILED_DECODE_STEP.fit(cuda, EAGER).why_not.startswith("CPU only")
    assert COMPILED_DECODE_STEP.fit(plain_llama, EAGER).ok


def test_smollm_compiled_decode_gives_the_eager_greedy_tokens(smollm):
    """SmolLM2, float32, 32 greedy steps: the compiled step chooses the tokens the eager loop chooses."""
    model = smollm.model
    step = CompiledDecode(model)
    with torch.inference_mode():
        for use in (False, True):
            cache = KVCache(smollm.config, 1, 80, smollm.dtype, "cpu")
            ids = torch.tensor([smollm.tokenizer.encode("The two phases of LLM inference are")])
            token = model(ids, cache)[0].argmax(-1, keepdim=True)  # (1, 1)
            tokens = []
            for _ in range(32):
                logits = step(token, cache, cache.plan(1)) if use else model.decode_rows(token, cache, cache.plan(1))
                token = logits.argmax(-1, keepdim=True)
                tokens.append(int(token))
            if not use:
                eager = tokens
    assert tokens == eager and step.fallbacks == 0


def test_the_overhead_lab_times_eager_steps_on_both_sides(plain_llama, tmp_path, compiled_only):
    """The step-overhead lab compares the real step with an eager same-depth skeleton: the real one must be eager too."""
    from engine.labs.step_overhead import measure_overhead

    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=True)
    fast, step = counted(with_kernels(plain_llama, "fast", tmp_path))
    eager = without_decode_step(fast)
    assert eager.backends.decode_step is None and fast.backends.decode_step is step
    assert eager.kernels.endswith("decode step eager") and "compiled" not in eager.kernels
    measure_overhead(fast, context=8, steps=3)
    assert step.calls == 0


def test_the_engines_own_decode_paths_never_fall_back_to_eager(plain_llama, tmp_path, compiled_only):
    """Caches made in or out of inference mode, read partly or to their end: all compiled at load, so a run's steps
    are the compiled ones its label names."""
    from engine.labs.bench import time_decode_ours

    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=True)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    engine.generate(fast, "hello there", 8, ignore_eos=True)
    time_decode_ours(fast, torch.tensor([[1, 2, 3, 4, 5]]), 6)  # its cache made outside inference mode, read to its end
    with torch.inference_mode():
        cache = KVCache(plain_llama.config, 1, 12, plain_llama.dtype, "cpu")
        fast.forward(torch.tensor([[1, 2, 3]]), cache)
        for _ in range(9):
            fast.forward(torch.tensor([[4]]), cache)
    assert fast.backends.decode_step.fallbacks == 0


def test_a_run_whose_steps_fell_back_says_so_in_its_trace(plain_llama, tmp_path, compiled_only, monkeypatch):
    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=True)
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert "ran the eager loop" not in engine.generate(fast, "hello", 5, ignore_eos=True).env["kernels"]
    step = fast.backends.decode_step

    def refused(*args):  # what the generated code's own size/stride check raises
        raise AssertionError("expected size 3==3, stride 64==128 at dim=1")
    monkeypatch.setattr(step, "layer", refused)
    trace = engine.generate(fast, "hello", 5, ignore_eos=True)
    assert trace.env["kernels"].startswith(fast.kernels)
    assert "4 decode steps of this run ran the eager loop" in trace.env["kernels"]


def test_generated_code_is_kept_per_instruction_set(plain_llama, tmp_path, monkeypatch):
    """Inductor read back code generated under another ISA cap and gave wrong logits: its folder is keyed by the machine."""
    folders = []
    for cap in (None, "avx2"):
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        if cap:
            monkeypatch.setenv("ATEN_CPU_CAPABILITY", cap)
        step = COMPILED_DECODE_STEP.build(plain_llama, EAGER, tmp_path)
        folders.append((os.environ["TORCHINDUCTOR_CACHE_DIR"], step.saved))
    assert folders[0] != folders[1] and all(f.startswith(str(tmp_path / "inductor")) for f, _ in folders)
    assert all(str(saved).startswith(f) for f, saved in folders)


def _saved_layer(tmp_path) -> list:
    return list((tmp_path / "inductor").glob("*/decode-layer-*.bin"))


@torch.inference_mode()
def test_a_later_process_reads_the_compiled_layer_instead_of_compiling(plain_llama, tmp_path, monkeypatch):
    """The first compile saves dynamo's code and inductor's kernels; the next load reads them: no trace, same logits."""
    from torch._dynamo.utils import counters

    first = CompiledDecode(plain_llama.model, tmp_path / "layer.bin")
    assert COMPILED_DECODE_STEP.check(plain_llama, EAGER, first)
    assert not first.loaded and (tmp_path / "layer.bin").is_file()
    frames = sum(counters["frames"].values())
    again = CompiledDecode(plain_llama.model, tmp_path / "layer.bin")
    assert COMPILED_DECODE_STEP.check(plain_llama, EAGER, again)  # checked against eager like a fresh compile
    assert again.loaded and again.fallbacks == 0
    assert sum(counters["frames"].values()) == frames  # dynamo traced nothing: the saved code ran
    eager_cache, cache = _filled(plain_llama, 40), _filled(plain_llama, 40)
    token = torch.tensor([[5]])
    torch.testing.assert_close(again(token, cache, cache.plan(1)),
                               plain_llama.model.decode_rows(token, eager_cache, eager_cache.plan(1)), rtol=1e-4, atol=1e-4)


@torch.inference_mode()
def test_a_saved_layer_that_is_unreadable_or_wrong_is_never_used(plain_llama, tmp_path, monkeypatch):
    saved = tmp_path / "layer.bin"
    saved.write_bytes(b"cut short")  # unreadable: compiled again, and the file written anew
    step = CompiledDecode(plain_llama.model, saved)
    assert COMPILED_DECODE_STEP.check(plain_llama, EAGER, step)
    assert not step.loaded and saved.stat().st_size > 1000

    class Wrong:  # read back, but its numbers are not the eager step's (another machine's code, say)
        fn = staticmethod(lambda x, *rest: 2 * x)
    monkeypatch.setattr(CompiledDecode, "_load", lambda self: setattr(self, "loaded", True) or Wrong())
    assert not COMPILED_DECODE_STEP.check(plain_llama, EAGER, CompiledDecode(plain_llama.model, saved))
    assert not saved.exists()  # removed: the next process compiles


def test_the_compiled_layer_is_kept_in_the_model_cache(plain_llama, tmp_path, compiled_only):
    write_verdict(tmp_path, plain_llama, COMPILED_DECODE_STEP, use=True)
    with_kernels(plain_llama, "fast", tmp_path)
    assert len(_saved_layer(tmp_path)) == 1
    fast = with_kernels(plain_llama, "fast", tmp_path)
    assert fast.backends.decode_step.loaded and fast.backends.decode_step.fallbacks == 0


@torch.inference_mode()
def test_bfloat16_compiled_steps_choose_the_eager_steps_tokens():
    """bfloat16: inductor rounds at its stores, the eager loop after every op; the greedy tokens agree on the tiny model."""
    lm = engine.load_model("tiny-llama", device="cpu", dtype="bfloat16", kernels="plain")
    step = CompiledDecode(lm.model)
    eager_cache, cache = _filled(lm, 40), _filled(lm, 40)
    token = torch.tensor([[3]])
    for _ in range(8):
        want = lm.model.decode_rows(token, eager_cache, eager_cache.plan(1))  # (1, V)
        got = step(token, cache, cache.plan(1))
        assert got.argmax(-1).tolist() == want.argmax(-1).tolist()
        torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-2 * float(want.abs().max()))
        token = want.argmax(-1, keepdim=True)
    assert step.fallbacks == 0 and step.layer is not None
