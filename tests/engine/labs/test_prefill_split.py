"""The prefill split lab: op categories and side-by-side timing of one pass vs chunks."""
from engine.labs.prefill_split import categorize, profile_whole, time_variants


def test_categories_of_a_llama_blocks_ops():
    assert categorize("mkldnn::_linear_pointwise", [[1024, 576], [3072, 576], [], [], [], []]) == "GEMM 3072x576"
    assert categorize("aten::addmm", [[960], [1024, 576], [576, 960]]) == "GEMM 576x960"
    assert categorize("aten::_scaled_dot_product_flash_attention_for_cpu", [[1, 9, 8, 64]]) == "attention kernel"
    assert categorize("aten::mul", [[1, 12, 1024, 64], [1024, 64]]).startswith("RoPE")
    assert categorize("aten::cat", [[], []]).startswith("RoPE")
    assert categorize("aten::mul", [[1, 1024, 1536], [1, 1024, 1536]]) == "MLP SiLU x up"
    assert categorize("aten::mul", [[1, 1024, 576], [1, 1024, 1]]) == "norms (RMSNorm pieces)"
    assert categorize("aten::mul", [[1, 1024, 576], [576]]) == "norms (RMSNorm pieces)"
    assert categorize("aten::add", [[1, 1024, 576], [1, 1024, 576], []]) == "residual adds"
    assert categorize("aten::copy_", [[1, 3, 1024, 64], [1, 3, 1024, 64], []]) == "KV cache writes and fills"
    assert categorize("aten::view", [[1]]) == "other"


def test_timing_and_profile_on_a_tiny_model(tiny_llama):
    ms = time_variants(tiny_llama, 24, [0, 8], rounds=1, cpu_time=True)
    assert set(ms) == {0, 8} and all(v >= 0 for v in ms.values())
    split, total = profile_whole(tiny_llama, 24)
    # torch's flash attention, or the prompts' C kernels where they were measured faster here
    assert {"attention kernel", "attention in C (with RoPE and the cache write)"} & set(split)
    assert any(k.startswith("GEMM") for k in split)
    assert abs(sum(split.values()) - total) < 1e-6
