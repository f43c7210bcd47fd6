"""scripts/bf16_gemv_bench.py times kernels against each other: every candidate it times must compute x @ Wᵀ (to bfloat16's
precision), or its GB/s would compare different work."""
import sys

import pytest
import torch
import torch.nn.functional as F

from tests import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import bf16_gemv_bench as bench  # noqa: E402


@pytest.mark.parametrize("fn", [bench.matvec_reduce, bench.matvec_reduce_split, bench.linear])
@pytest.mark.parametrize("rows", [1, 3])
def test_the_reductions_are_the_matmul(fn, rows):
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(40, 32, generator=gen).bfloat16()  # (N, K)
    x = torch.randn(rows, 32, generator=gen).bfloat16()  # (M, K)
    got = fn(x, w)
    assert got.shape == (rows, 40) and got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), F.linear(x.float(), w.float()), rtol=2e-2, atol=2e-2)


def test_the_eager_candidates_pass_the_check():
    gen = torch.Generator().manual_seed(1)
    ws = [torch.randn(n, k, generator=gen).bfloat16() for n, k in [(48, 32), (32, 64)]]  # (N, K) each
    xs = [torch.randn(1, w.shape[1], generator=gen).bfloat16() for w in ws]  # (1, K) each
    cands = bench.candidates(ws, xs, {"plain", "aten-gemv", "stream-read"}, autotune=False)
    assert {"plain", "aten-gemv", "stream-read"} <= set(cands)
    errs = bench.check(ws, xs, cands)
    assert all(err < 2e-2 for err in errs.values()), errs
