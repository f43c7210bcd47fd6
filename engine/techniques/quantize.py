"""Fewer bytes per weight: weight-only int8 for every linear layer (and the LM head), on a COPY of the model.

Each output row of a weight matrix W (N, K) gets one scale s = max|W_row| / 127 and is stored as
round(W / s) in int8 (symmetric, per output channel), so the matrix is 4x smaller than float32.
Activations stay in float. Decode reads every weight once per token, so it gets faster roughly in
proportion to the bytes saved; prefill is bound by arithmetic, which int8 storage does not reduce.
Decode's matrix-vector products use PyTorch's own int8-weight kernel (`aten._weight_int8pack_mm`,
as gpt-fast does) where the device has it; prefill's wide matmuls (and devices without the kernel)
dequantise the weight on the fly and run an ordinary float GEMM.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import torch
from torch import nn

from engine.techniques.kernels import with_kernels

KERNEL_MAX_ROWS = 8  # above this many rows (prefill), dequantise + float GEMM beat the int8 kernel on CPU


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """W (N, K) float -> (int8 (N, K), scales (N,)) with W ~= int8 * scales[:, None]."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-10)  # (N,)
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)  # (N, K)
    return q, scales


def int8_kernel_works(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether `aten._weight_int8pack_mm` runs (and is right) for this device and activation dtype."""
    op = getattr(torch.ops.aten, "_weight_int8pack_mm", None)
    if op is None:
        return False
    try:
        x = torch.randn(3, 32, device=device).to(dtype)  # (M, K)
        w = torch.randint(-127, 128, (16, 32), dtype=torch.int8, device=device)  # (N, K)
        s = torch.rand(16, device=device).to(dtype) + 0.5  # (N,)
        got = op(x, w, s).float()
        want = x.float() @ (w.float() * s.float()[:, None]).T
        return bool(torch.allclose(got, want, rtol=2e-2, atol=2e-2 * float(want.abs().max())))
    except (RuntimeError, NotImplementedError, TypeError):
        return False


class Int8Linear(nn.Module):
    """A drop-in for nn.Linear holding int8 weights (N, K) and float scales (N,)."""

    def __init__(self, linear: nn.Linear, use_kernel: bool, kernel_dtype: torch.dtype | None = None):
        super().__init__()
        q, scales = quantize_weight(linear.weight)
        dtype, device = linear.weight.dtype, linear.weight.device
        self.register_buffer("weight_int8", q.to(device))  # (N, K)
        self.register_buffer("scales", scales.to(device=device, dtype=dtype))  # (N,)
        # the kernel's activation dtype: on CPU its fast path takes bfloat16 (float32 input is ~8x slower)
        self.kernel_dtype = kernel_dtype or dtype
        self.register_buffer("kernel_scales", scales.to(device=device, dtype=self.kernel_dtype))  # (N,)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.use_kernel = use_kernel

    def forward(self, x: torch.Tensor, ops=None) -> torch.Tensor:
        """x (..., in) -> (..., out); `ops` is ignored: the int8 kernel is this layer's own choice."""
        shape = x.shape
        x2 = x.reshape(-1, self.in_features).to(self.scales.dtype)  # (M, K) with M = B * T
        if self.use_kernel and x2.shape[0] <= KERNEL_MAX_ROWS:  # decode: a few rows, the int8 kernel
            xk = x2.to(self.kernel_dtype).contiguous()  # (M, K)
            y = torch.ops.aten._weight_int8pack_mm(xk, self.weight_int8, self.kernel_scales).to(x2.dtype)  # (M, N)
        else:  # prefill (or no kernel): dequantise, then an ordinary float GEMM; the bytes read are int8
            y = x2 @ (self.weight_int8.to(x2.dtype) * self.scales[:, None]).T  # (M, N)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

    @property
    def nbytes(self) -> int:
        b = self.weight_int8.numel() + self.kernel_scales.numel() * self.kernel_scales.element_size()
        return b + (0 if self.bias is None else self.bias.numel() * self.bias.element_size())


def matrix_bytes(model: nn.Module) -> int:
    """Bytes of the matrices a decode step reads in full: every linear layer and the LM head."""
    total = 0
    for module in model.modules():
        if isinstance(module, Int8Linear):
            total += module.nbytes
        elif isinstance(module, nn.Linear):
            total += module.weight.numel() * module.weight.element_size()
            if module.bias is not None:
                total += module.bias.numel() * module.bias.element_size()
    return total


def quantize_model(lm, include_lm_head: bool = True):
    """A copy of LoadedModel `lm` whose linear layers hold int8 weights; `lm` itself is untouched.

    Returns (quantized LoadedModel, kernel name). The token embedding stays float: a lookup reads one
    row per token, not the whole matrix; a tied LM head gets its own int8 copy.
    """
    lm = with_kernels(lm, "plain")  # the eager reference's ops: the int8 layers run themselves
    # prefer bfloat16 activations for the kernel where it works (its fast path on CPU), else the model's dtype
    kernel_dtype = next((d for d in (torch.bfloat16, lm.dtype) if int8_kernel_works(lm.device, d)), None)
    use_kernel = kernel_dtype is not None
    model = copy.deepcopy(lm.model)

    def swap(parent: nn.Module) -> None:
        for name, child in parent.named_children():
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child, use_kernel, kernel_dtype))
            else:
                swap(child)

    swap(model.blocks)
    if include_lm_head:
        model.lm_head = Int8Linear(model.lm_head, use_kernel, kernel_dtype)
    model.eval().requires_grad_(False)
    kernel = (f"aten._weight_int8pack_mm ({str(kernel_dtype).removeprefix('torch.')} activations) for up to "
              f"{KERNEL_MAX_ROWS} rows (decode), dequantise + float GEMM above"
              if use_kernel else "dequantise on the fly + float GEMM (no int8-weight kernel for this device/dtype)")
    qlm = replace(lm, model=model, name=f"{lm.name} int8", kernels="int8 weights")
    return qlm, kernel


@dataclass(frozen=True)
class Agreement:
    positions: int  # next-token predictions compared
    top1_agreement: float  # fraction where int8 and float pick the same greedy token
    max_abs_logit_diff: float
    rel_error: float  # ||int8 - float|| / ||float|| over all logits


@torch.inference_mode()
def compare_logits(lm_float, lm_int8, prompts: list[list[int]]) -> Agreement:
    """Run the same prompts through both models (all positions) and compare their logits."""
    from engine.core.generate import new_cache, prefill

    same = count = 0
    max_diff = 0.0
    num = den = 0.0
    for ids in prompts:
        x = torch.tensor([ids], device=lm_float.device)  # (1, T)
        a = prefill(lm_float, x, new_cache(lm_float, 1, len(ids)), all_logits=True)[0].float()  # (T, V)
        b = prefill(lm_int8, x, new_cache(lm_int8, 1, len(ids)), all_logits=True)[0].float()  # (T, V)
        same += int((a.argmax(-1) == b.argmax(-1)).sum())
        count += a.shape[0]
        max_diff = max(max_diff, float((a - b).abs().max()))
        num += float((a - b).pow(2).sum())
        den += float(a.pow(2).sum())
    return Agreement(count, same / max(count, 1), max_diff, (num / den) ** 0.5 if den > 0 else float("nan"))
