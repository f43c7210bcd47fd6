"""Which matmul kernels the linear layers run: `plain` (nn.Linear, the readable teaching path) or `fast`.

A decode step reads every weight once, so it is bound by how well the matmul kernel streams the
weights, not by the arithmetic. `fast` keeps the same weights and the same maths and only changes
how they are read: library kernels chosen per device and dtype (no hand-written kernels).

  cpu float32    oneDNN inner product on weights reordered once into its blocked layout
                 (`torch.ops.mkldnn._reorder_linear_weight`): the same numbers as nn.Linear to ~1e-6,
                 so greedy tokens are identical; one packed copy serves decode (M=1) and prefill (M=T).
  cpu bfloat16   oneDNN prepacked bfloat16 where the CPU has the instructions for it (AVX-512 BF16 or
                 AVX-NE-CONVERT); elsewhere bfloat16 matrix-vector products for decode and, for wide
                 prompts, the weight widened to float32 for one float32 GEMM (PyTorch has no fast bfloat16
                 GEMM without those instructions: 4x slower here).
  cuda / mps     the vendor library (cuBLAS / MPS) is already what nn.Linear calls: fast = plain;
                 on CUDA the decode remedy is CUDA graphs (engine/techniques/cuda_graphs.py).

Measured on the 2-core AVX2 VM (python -m engine bench --kernels both; README, Performance). Tried
and left out: torch.compile with weight freezing (~12 % faster decode, but 60-100 s to compile on
2 cores, paid again in every worker process); fp16 weights through FBGEMM (half the bytes, so
~2x faster decode, but it changes the numbers: that is quantisation, a different remedy).

The fast model is a twin of the plain one: it shares every parameter (the packed layout is one
extra copy of the matrices), and `with_kernels(fast_lm, "plain")` gives the plain model back.
"""
from __future__ import annotations

import copy
import dataclasses
import functools

import torch
import torch.nn.functional as F
from torch import nn

KERNELS = ("plain", "fast")
WIDE_ROWS = 8  # bfloat16 without oneDNN: above this many rows (prompts), one float32 GEMM beats bfloat16's


class PackedLinear(nn.Module):
    """nn.Linear through oneDNN, with the weight reordered once into oneDNN's blocked layout."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # shared with the plain model: weight_bytes, and the way back to plain
        self.bias = linear.bias
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().contiguous(), None)  # opaque

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)  # (M, K), M = B * T
        y = torch.ops.mkldnn._linear_pointwise(x2, self.packed, self.bias, "none", [], "")  # (M, N)
        return y.view(*x.shape[:-1], self.out_features)


class WidenedGemmLinear(nn.Module):
    """bfloat16/float16 weights: the dtype's own matrix-vector kernel for decode, float32 GEMM for prompts."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() // self.in_features <= WIDE_ROWS:  # decode: a few rows, reading the half-size weights
            return F.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.float()
        return F.linear(x.float(), self.weight.float(), bias).to(x.dtype)  # (B, T, N)


FAST_LINEARS = (PackedLinear, WidenedGemmLinear)  # what replaces nn.Linear on the fast path


@functools.cache  # a property of this CPU and dtype: probe once per process
def _onednn_packs(dtype: torch.dtype) -> bool:
    """Whether oneDNN can prepack a weight of this dtype on this CPU (and gives the right answer)."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.randn(24, 16).to(dtype)  # (N, K)
        x = torch.randn(3, 16).to(dtype)  # (M, K)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
        got = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "").float()
        want = x.float() @ w.float().T
        return bool(torch.allclose(got, want, rtol=2e-2, atol=2e-2 * float(want.abs().max())))
    except (RuntimeError, NotImplementedError, TypeError):
        return False


def fast_path(device: torch.device, dtype: torch.dtype) -> tuple[type[nn.Module] | None, str]:
    """(the Linear replacement or None for plain, a label saying what the matmuls run) for this device/dtype."""
    if device.type != "cpu":
        library = "cuBLAS" if device.type == "cuda" else "Metal"
        return None, f"plain ({library} already; fast = plain on {device.type})"
    if _onednn_packs(dtype):
        return PackedLinear, f"fast: oneDNN prepacked {str(dtype).removeprefix('torch.')}"
    if dtype in (torch.bfloat16, torch.float16):
        name = str(dtype).removeprefix("torch.")
        return WidenedGemmLinear, f"fast: {name} GEMV for decode, float32 GEMM for prompts"
    return None, "plain (no faster kernel for this CPU and dtype)"


def _swap(parent: nn.Module, make) -> None:
    for name, child in parent.named_children():
        replacement = make(child)
        if replacement is not None:
            setattr(parent, name, replacement)
        else:
            _swap(child, make)


def _twin(model: nn.Module, make) -> nn.Module:
    """A copy of `model` sharing every parameter and buffer, with modules replaced where make(m) is not None."""
    packed = [m.packed for m in model.modules() if isinstance(m, PackedLinear)]  # opaque: cannot be copied
    shared = {id(t): t for t in [*model.parameters(), *model.buffers(), *packed]}
    twin = copy.deepcopy(model, shared)  # new module objects, the same tensors
    _swap(twin.blocks, make)
    replacement = make(twin.lm_head)
    if replacement is not None:  # a tied head gets its own packed copy; the embedding keeps the plain matrix
        twin.lm_head = replacement
    return twin.eval().requires_grad_(False)


def _plain_linear(module: nn.Module) -> nn.Linear | None:
    if not isinstance(module, FAST_LINEARS):
        return None
    with torch.device("meta"):
        linear = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
    linear.weight = module.weight
    linear.bias = module.bias
    return linear


def with_kernels(lm, kernels: str):
    """`lm` running the asked kernels: `lm` itself when it already does, else a twin sharing its weights."""
    if kernels not in KERNELS:
        raise ValueError(f"unknown kernels '{kernels}'; use one of {', '.join(KERNELS)}")
    if kernels == lm.kernel_choice:
        return lm
    if kernels == "plain":
        return dataclasses.replace(lm, model=_twin(lm.model, _plain_linear), kernels="plain", kernel_choice="plain")
    cls, label = fast_path(lm.device, lm.dtype)
    if cls is None:
        return dataclasses.replace(lm, kernels=label, kernel_choice="fast")
    model = _twin(lm.model, lambda m: cls(m) if isinstance(m, nn.Linear) else None)
    return dataclasses.replace(lm, model=model, kernels=label, kernel_choice="fast")

