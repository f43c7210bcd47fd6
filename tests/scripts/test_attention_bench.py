"""scripts/attention_bench.py times causal prefill attention variants: each must compute what SDPA computes (a
faster wrong kernel would be a false win), and the GFLOP/s it prints rests on the causal-half FLOP count."""
import sys

import pytest
import torch

from tests import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import attention_bench as ab  # noqa: E402


def test_causal_gflop_is_half_of_two_full_matmuls():
    T = 1024
    full = 2 * (2 * ab.H * T * T * ab.D)  # QK^T and PV, 2 FLOP per multiply-add
    assert ab.causal_gflop(T) == pytest.approx(full / 2 / 1e9)
    assert 30 * ab.causal_gflop(T) == pytest.approx(36.2, abs=0.1)  # the brief's 36 GFLOP for 30 layers


@pytest.mark.parametrize("name", ["sdpa_repeat", "sdpa_math"])
def test_eager_variants_match_sdpa(name):
    q, k, v = ab.inputs(96, torch.float32)
    torch.testing.assert_close(ab.variants(name)(q, k, v), ab.sdpa(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flex", "flex_fold"])
def test_compiled_flex_variants_match_sdpa(name):
    """Compiles with inductor (seconds to a minute on 2 cores): causal block mask, GQA, a length not a block multiple."""
    q, k, v = ab.inputs(200, torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(ab.variants(name)(q, k, v), ab.sdpa(q, k, v), rtol=1e-5, atol=1e-5)
