"""Which code a decode step runs, in words, and the model that runs the batched path at every batch size.

A Run at batch 1 may take a fused decode step (hand-written C or torch.compile: `lm.backends.decode_step`, chosen
at load by engine/techniques/kernels.py) that serves one sequence only; batch 2 and more take the model's flat
batched loop (engine/core/model.py: decode_rows). A sweep that put batch 1 on the fused step and batch 2 on the loop
would compare two programs, not two batch sizes: batching could then read as making the bridge slower. So the batch
sweep runs every size on the batched path and keeps the fused batch-1 point apart, each point naming the path it ran.
The names follow what `engine.core.backends.run_pass` does with the model's Backends; a Trace records the same
choice as data in `trace.env["backends"]["decode_step"]`.
"""
from __future__ import annotations

from engine.techniques.kernels import without_decode_step

FUSED_C, FUSED_COMPILED = "fused C step (batch 1 only)", "compiled step (batch 1 only)"
FLAT_LOOP = "flat batched loop (any batch)"
BLOCKS = "the model's blocks (any batch)"
FUSED = {"C": FUSED_C, "torch.compile": FUSED_COMPILED}  # a DecodeStep's kind -> its name here


def has_fused_step(lm) -> bool:
    """Whether this model's batch-1 decode steps take a fused step that larger batches cannot."""
    return lm.backends.decode_step is not None


def decode_path(lm, batch: int) -> str:
    """The decode path a step of `batch` sequences runs on `lm` (what run_pass picks from `lm.backends`)."""
    if batch == 1 and has_fused_step(lm):
        kind = lm.backends.decode_step.kind
        return FUSED.get(kind, f"fused {kind} step (batch 1 only)")
    if lm.backends.flat_decode and lm.config.uses_rope:
        return FLAT_LOOP
    return BLOCKS


def batched_path(lm):
    """`lm` with every decode step on the path batches take (the same model and weights, its decode step left
    out), or `lm` itself when its batch-1 steps already take it. Prefill, kernels and threads stay those of `lm`."""
    return without_decode_step(lm) if has_fused_step(lm) else lm
