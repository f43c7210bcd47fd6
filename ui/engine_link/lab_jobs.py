"""The lab measurements a page may start, by name: engine/serving/scheduling/lab_jobs.py's registry, re-exported so pages import only ui.

A page passes one of these to worker_link.lab_run; a misspelt name is an AttributeError the page tests catch,
and tests/engine/serving/scheduling/test_lab_jobs.py checks every target's signature, so no job is misnamed at run time.
"""
from engine.serving.scheduling.lab_jobs import (
    ATTENTION_CAPTURE,
    BATCH_SWEEP,
    CONTEXT_SWEEP,
    CROSSED,
    CUDA_GRAPHS,
    DTYPES,
    HARDWARE_PEAKS,
    INT8,
    KERNELS,
    KV_CACHE,
    MODEL_DESCRIBE,
    OUTPUT_SWEEP,
    OVERHEAD,
    PREFIX_CACHE,
    PROFILE,
    PROMPT_SWEEP,
    REFERENCE_RUN,
    SPECULATIVE,
    TRAFFIC,
    LabJob,
)

__all__ = [
    "ATTENTION_CAPTURE", "BATCH_SWEEP", "CONTEXT_SWEEP", "CROSSED",
    "CUDA_GRAPHS", "DTYPES", "HARDWARE_PEAKS", "INT8", "KERNELS", "KV_CACHE",
    "MODEL_DESCRIBE", "OUTPUT_SWEEP", "OVERHEAD", "PREFIX_CACHE", "PROFILE", "PROMPT_SWEEP", "REFERENCE_RUN",
    "SPECULATIVE", "TRAFFIC", "LabJob",
]
