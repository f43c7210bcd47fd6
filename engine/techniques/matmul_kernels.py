"""The linear layers' products through the library kernels measured fastest here, as the ops a pass hands its layers.

kernel_choice.py times each candidate (kernel_candidates.py) per phase on this machine; `MatmulKernels` keeps,
for every linear layer of one model, what the chosen kernels need besides the weight itself (a packed copy, or
nothing) and picks the phase's kernel by the number of rows a call brings: decode's one, a batch's few (up to
WIDE_PASS), a prompt's, a long prompt's (LONG_FROM rows or more). The model's modules and weights are never touched:
the plain model and the fast one are the same modules, one run with torch's ops, the other with these.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.core.backends import WIDE_PASS, TorchOps
from engine.techniques.kernel_candidates import apply, prepare
from engine.techniques.kernel_choice import LONG_FROM, ROWS, Choice


class _Prepared:
    """One linear layer's kernel per phase, each with its extras (a packed copy: opaque to anything but the kernel)."""

    def __init__(self, weight: torch.Tensor, decode: str, batch: str, prefill: str, long: str):
        made = [(decode, prepare(decode, weight, ROWS["decode"]))]
        for kernel, phase in ((batch, "decode_batch"), (prefill, "prefill"), (long, "prefill_long")):
            made.append((kernel, self._share(kernel, weight, ROWS[phase], made)))  # packed for the rows it was raced at
        self.decode, self.batch, self.prefill, self.long = made

    @staticmethod
    def _share(kernel: str, weight: torch.Tensor, rows: int, made: list[tuple[str, tuple]]) -> tuple:
        """A kernel's extras, shared with a phase that already made them (MKL packs for a number of rows: its own)."""
        for other, extras in made:
            if other == kernel and kernel != "mkl-packed":
                return extras
        return prepare(kernel, weight, rows)


class MatmulKernels(TorchOps):
    """TorchOps whose products run through `choice`'s kernels (the same weights, the same maths)."""

    def __init__(self, model: nn.Module, choice: Choice, decode: str | None = None):
        """`decode`: the kernel for a few rows instead of the measured ones (a pass that only serves prompts)."""
        self.choice = choice
        self.name = (f"measured: {choice.decode} for decode, {choice.batch} for a batch's steps, {choice.prefill} for "
                     f"prompts, {choice.long} for long ones")
        kernels = (decode or choice.decode, decode or choice.batch, choice.prefill, choice.long)
        plain = set(kernels) == {"plain"}  # then every product is nn.Linear's own call, as in the reference
        self.table = {} if plain else {m: _Prepared(m.weight.detach(), *kernels)
                                       for m in model.modules() if isinstance(m, nn.Linear)}

    def record(self) -> dict:
        return {"decode": self.choice.decode, "decode_batch": self.choice.batch, "prefill": self.choice.prefill,
                "prefill_long": self.choice.long}

    def linear(self, m, x: torch.Tensor) -> torch.Tensor:
        prepared = self.table.get(m)
        if prepared is None:  # plain F.linear won every phase (or a layer the model did not have then)
            return F.linear(x, m.weight, m.bias)
        x2 = x.reshape(-1, m.in_features)  # (M, K), M = B * T
        rows = x2.shape[0]
        kernel, extras = (prepared.decode if rows == 1 else prepared.batch if rows <= WIDE_PASS
                          else prepared.prefill if rows < LONG_FROM else prepared.long)
        return apply(kernel, x2, m.weight, m.bias, extras).view(*x.shape[:-1], m.out_features)  # (..., N)


