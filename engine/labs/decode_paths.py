"""Which code a decode step runs, in words, and the model that runs the batched path at every batch size.

A Run at batch 1 may take a fused decode step (hand-written C or torch.compile, engine/techniques/kernels.py) that
serves one sequence only; batch 2 and more take the model's flat batched loop (engine/core/model.py: decode_rows).
A sweep that put batch 1 on the fused step and batch 2 on the loop would compare two programs, not two batch sizes:
batching could then read as making the bridge slower. So the batch sweep runs every size on the batched path and
keeps the fused batch-1 point apart, each point naming the path it ran.
"""
from __future__ import annotations

from engine.core.model import DECODE_STEP_LABELS
from engine.techniques.kernels import without_compiled_decode

FUSED_C, FUSED_COMPILED = "fused C step (batch 1 only)", "compiled step (batch 1 only)"
FLAT_LOOP = "flat batched loop (any batch)"
BLOCKS = "the model's blocks (any batch)"


def has_fused_step(lm) -> bool:
    """Whether this model's batch-1 decode steps take a fused step that larger batches cannot."""
    return getattr(lm.model, "compiled_decode", None) is not None


def decode_path(lm, batch: int) -> str:
    """The decode path a step of `batch` sequences runs on `lm` (what engine/core/model.py's forward picks)."""
    if batch == 1 and has_fused_step(lm):
        return FUSED_C if DECODE_STEP_LABELS[1] in (lm.kernels or "") else FUSED_COMPILED
    if getattr(lm.model, "flat_decode", False) and lm.config.uses_rope:
        return FLAT_LOOP
    return BLOCKS


def batched_path(lm):
    """`lm` with every decode step on the path batches take (a twin sharing the weights), or `lm` itself when its
    batch-1 steps already take it. Prefill, kernels and threads stay those of `lm`."""
    return without_compiled_decode(lm) if has_fused_step(lm) else lm
