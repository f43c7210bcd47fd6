"""The library matmul kernels a linear layer can run on CPU: the candidates kernel_choice.py times on each machine.

Every one computes x @ Wᵀ + b with the same weights; they differ only in how the weights are laid out and read:

  plain       F.linear: MKL's GEMM/GEMV for float32; oneDNN's matmul for bfloat16 on AVX-512 CPUs
  prepacked   oneDNN inner product on weights reordered once into its blocked layout (what torch.compile's
              freezing does on CPU)
  onednn      the same oneDNN inner product on the plain weights (no packed copy)
  mkl-packed  MKL's packed GEMM (`cblas_sgemm_pack`, float32 only), the weights packed once per phase's rows
  widened     bfloat16/float16 weights widened to float32 for one float32 GEMM (prefill only: the widening
              costs a write and a read of every weight, which only a wide product pays back)

prepacked, onednn and mkl-packed call the private ops torch's own compiler emits for CPU linears (torch has no
public packed-weight API); a torch without them fails `available` and the candidate is not timed.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Candidate:
    words: str  # what the sidebar and the Trace say
    phases: tuple[str, ...]  # the phases it may serve
    dtypes: tuple[torch.dtype, ...]  # the weight dtypes it takes


_HALF = (torch.bfloat16, torch.float16)
CANDIDATES = {
    "plain": Candidate("plain F.linear", ("decode", "prefill"), (torch.float32, *_HALF)),
    "prepacked": Candidate("oneDNN prepacked", ("decode", "prefill"), (torch.float32, *_HALF)),
    "onednn": Candidate("oneDNN on plain weights", ("decode", "prefill"), (torch.float32, *_HALF)),
    "mkl-packed": Candidate("MKL packed GEMM", ("decode", "prefill"), (torch.float32,)),
    "widened": Candidate("float32 GEMM from widened weights", ("prefill",), _HALF),
}


def prepare(kernel: str, weight: torch.Tensor, rows: int) -> tuple:
    """What `kernel` keeps besides the weight itself (a packed copy, or nothing), for inputs of about `rows` rows."""
    with torch.no_grad():
        if kernel == "prepacked":
            return (torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), None),)  # opaque oneDNN tensor
        if kernel == "mkl-packed":
            return (torch.ops.mkl._mkl_reorder_linear_weight(weight.detach().contiguous(), rows),)  # MKL's packed buffer
    return ()


def apply(kernel: str, x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, extras: tuple) -> torch.Tensor:
    """x2 (M, K) -> (M, N) through `kernel`."""
    if kernel == "plain":
        return F.linear(x2, weight, bias)
    if kernel == "prepacked":
        return torch.ops.mkldnn._linear_pointwise(x2, extras[0], bias, "none", [], "")
    if kernel == "onednn":
        return torch.ops.mkldnn._linear_pointwise(x2, weight, bias, "none", [], "")
    if kernel == "mkl-packed":
        return torch.ops.mkl._mkl_linear(x2, extras[0], weight, bias, x2.shape[0])
    if kernel == "widened":
        b = None if bias is None else bias.float()
        return F.linear(x2.float(), weight.float(), b).to(x2.dtype)
    raise ValueError(f"unknown kernel '{kernel}'")


@functools.cache  # a property of this CPU, this torch build and the dtype: probe once per process
def available(kernel: str, dtype: torch.dtype) -> bool:
    """Whether `kernel` runs here for this dtype and gives nn.Linear's answer (to the dtype's precision)."""
    if dtype not in CANDIDATES[kernel].dtypes:
        return False
    if kernel in ("prepacked", "onednn") and not torch.backends.mkldnn.is_available():
        return False
    if kernel == "mkl-packed" and not torch.backends.mkl.is_available():
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        w = torch.randn(24, 16, generator=gen).to(dtype)  # (N, K)
        b = torch.randn(24, generator=gen).to(dtype)  # (N,)
        want_tol = 2e-2 if dtype in _HALF else 1e-4
        for rows in (1, 9):
            x = torch.randn(rows, 16, generator=gen).to(dtype)  # (M, K)
            got = apply(kernel, x, w, b, prepare(kernel, w, rows)).float()
            want = x.float() @ w.float().T + b.float()
            if got.shape != want.shape or not torch.allclose(got, want, rtol=want_tol, atol=want_tol * float(want.abs().max())):
                return False
        return True
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return False
