"""The two kernel paths (engine/techniques/kernels.py): fast gives nn.Linear's numbers in float32 (the same
greedy tokens), stays within a bound in bfloat16, runs the same modules and weights, and is what the user asked for.
Which kernels fast runs is measured per machine (test_kernel_choice.py); here they are forced where it matters."""
import subprocess
import sys

import pytest
import torch

import engine
from engine.core.generate import new_cache, prefill
from engine.errors import EngineError
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.work import ModelSpec
from engine.techniques import kernel_choice
from engine.techniques.kernels import with_kernels
from engine.techniques.matmul_kernels import MatmulKernels

PROMPTS = ["Write a short poem about the sea.", "What is a KV cache? Answer in two sentences.",
           "List three rivers in Europe."]


def _logits(lm, ids: list[int]) -> torch.Tensor:
    """(T, V) float32 logits of every position."""
    return prefill(lm, torch.tensor([ids], device=lm.device), new_cache(lm, 1, len(ids)), all_logits=True)[0].float()


def _fast_layers(lm) -> int:
    """Linear layers whose products run through a kernel chosen here."""
    return len(lm.backends.ops.table) if isinstance(lm.backends.ops, MatmulKernels) else 0


@pytest.fixture
def prepacked_wins(monkeypatch, tmp_path):
    """A machine where oneDNN prepacked measures fastest in both phases (a cache of its own)."""
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    monkeypatch.setattr(kernel_choice, "_time_pass", lambda kernel, mats: 0.001 if kernel == "prepacked" else 1.0)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_fast_and_plain_agree_on_both_architectures(name, prepacked_wins):
    fast = engine.load_model(name, device="cpu")  # fast is the default
    plain = with_kernels(fast, "plain")
    assert (fast.kernel_choice, plain.kernel_choice) == ("fast", "plain")
    assert _fast_layers(fast) == 4 * fast.config.n_layers + 1 and _fast_layers(plain) == 0  # every Linear + the head
    ids = list(range(3, 40))
    torch.testing.assert_close(_logits(fast, ids), _logits(plain, ids), atol=1e-4, rtol=1e-4)
    a = engine.generate(fast, ids, 12, ignore_eos=True)
    b = engine.generate(plain, ids, 12, ignore_eos=True)
    assert a.output_ids == b.output_ids and a.env["kernels"] == fast.kernels and b.env["kernels"] == "plain"


def test_plain_and_fast_run_the_same_modules_with_other_backends(prepacked_wins):
    tiny_llama = engine.load_model("tiny-llama", device="cpu")
    plain = with_kernels(tiny_llama, "plain")
    assert plain.model is tiny_llama.model and plain.weight_bytes == tiny_llama.weight_bytes  # no copy, no twin
    assert plain.backends == engine.loading.loader.EAGER and _fast_layers(tiny_llama) > 0
    assert with_kernels(tiny_llama, "fast") is tiny_llama and with_kernels(plain, "plain") is plain
    back = with_kernels(plain, "fast")
    assert back.model is tiny_llama.model and back.kernels == tiny_llama.kernels


def test_smollm_fast_float32_gives_the_same_greedy_tokens(smollm):
    assert smollm.kernels.startswith("fast: ") and "plain" in smollm.kernel_why, smollm.kernels
    plain = with_kernels(smollm, "plain")
    for prompt in PROMPTS:
        a = engine.generate(smollm, prompt, 32, chat=True, ignore_eos=True)
        b = engine.generate(plain, prompt, 32, chat=True, ignore_eos=True)
        assert a.output_ids == b.output_ids, prompt
    ids = engine.generate(plain, PROMPTS[0], 1, chat=True).prompt_ids
    assert float((_logits(smollm, ids) - _logits(plain, ids)).abs().max()) < 1e-3


def test_smollm_fast_bfloat16_stays_within_a_bound_of_plain(smollm):
    """bfloat16 fast (oneDNN bf16, or bf16 GEMV + float32 GEMM for prompts) vs plain bfloat16, both against float32."""
    plain16 = engine.load_model("smollm2-135m", device="cpu", dtype="bfloat16", kernels="plain")
    fast16 = with_kernels(plain16, "fast")
    assert fast16.kernels.startswith("fast: ") and "plain" in fast16.kernel_why
    ids = engine.generate(smollm, PROMPTS[1], 1, chat=True).prompt_ids
    ref = _logits(with_kernels(smollm, "plain"), ids)

    def rel(x: torch.Tensor) -> float:
        return float((x - ref).norm() / ref.norm())

    fast_err, plain_err = rel(_logits(fast16, ids)), rel(_logits(plain16, ids))
    assert fast_err < 0.05 and plain_err < 0.05, (fast_err, plain_err)  # bfloat16 keeps ~3 significant digits
    top1 = (_logits(fast16, ids).argmax(-1) == _logits(plain16, ids).argmax(-1)).float().mean()
    assert top1 >= 0.9, float(top1)
    a = engine.generate(fast16, PROMPTS[1], 8, chat=True, ignore_eos=True)  # decode: the one-row path
    b = engine.generate(plain16, PROMPTS[1], 8, chat=True, ignore_eos=True)
    assert a.output_ids[:3] == b.output_ids[:3]


def test_pool_loads_the_weights_once_for_both_paths(prepacked_wins):
    calls = []

    def loader(name, **kw):
        calls.append(kw["kernels"])
        return engine.load_model(name, **kw)

    pool = ModelPool(loader)
    fast = pool.get(ModelSpec("tiny-llama", "cpu", "float32", "fast"))
    plain = pool.get(ModelSpec("tiny-llama", "cpu", "float32", "plain"))
    assert calls == ["fast"] and plain.kernel_choice == "plain"
    assert plain.model.blocks[0].attn.qkv.weight is fast.model.blocks[0].attn.qkv.weight


def test_unknown_kernels_is_a_clear_error():
    with pytest.raises(EngineError, match="unknown kernels 'turbo'; use one of plain, fast"):
        engine.load_model("tiny-llama", device="cpu", kernels="turbo")


def test_cli_says_which_kernels_ran():
    def run(*extra):
        return subprocess.run([sys.executable, "-m", "engine", "generate", "--prompt", "two bends", "--model", "tiny-llama",
                               "--max-new-tokens", "3", "--ignore-eos", *extra], capture_output=True, text=True, timeout=120)

    plain, fast = run("--kernels", "plain"), run()
    assert plain.returncode == 0 and fast.returncode == 0, plain.stderr + fast.stderr
    assert "kernels plain)" in plain.stdout and "kernels fast: " in fast.stdout
    bad = run("--kernels", "turbo")
    assert bad.returncode == 2 and "invalid choice: 'turbo'" in bad.stderr
