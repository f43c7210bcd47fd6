"""What a model loaded with `kernels="fast"` runs: its Backends (engine/core/backends.py), chosen once, by measurement.

On CPU every candidate is measured on this machine, at this model's shapes, against what would run without it, and
kept only where faster (ties go to plain), the verdicts cached (measured_cache.py):

  matmuls        the library kernels for the linear layers, per phase (kernel_choice.py; candidates:
                 kernel_candidates.py; as ops: matmul_kernels.py)
  prompt pass    a bfloat16/float16 model's prompts in float32 from a widened copy of its weights (prompt_pass.py)
  prompt ops     a float32 prompt's work between its matmuls in three C kernels (prompt_kernels.py)
  decode step    a batch-1 decode step as one C call (c_decode.py); where that cannot serve or lost, as code
                 torch.compile generated (compiled_decode.py)

On CUDA and MPS fast = plain (nn.Linear already calls cuBLAS or Metal); the decode remedy on CUDA is CUDA graphs
(cuda_graphs.py). Plain and fast share every module and weight; only the Backends differ, so going back is
`with_kernels(fast, "plain")`. What was tried and left out: docs/decisions/not-kept.md.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.core.backends import EAGER, Backends
from engine.techniques import c_build, c_decode, prompt_kernels
from engine.techniques.c_decode import C_DECODE_STEP
from engine.techniques.compiled_decode import COMPILED_DECODE_STEP
from engine.techniques.fast_paths import FastPath, decide, forced_plain
from engine.techniques.kernel_choice import choose
from engine.techniques.matmul_kernels import MatmulKernels
from engine.techniques.measured_cache import default_cache_dir
from engine.techniques.prompt_kernels import C_PROMPT_KERNELS
from engine.techniques.prompt_pass import FLOAT32_PROMPTS

KERNELS = ("plain", "fast")
PROMPT_PATHS: tuple[FastPath, ...] = (FLOAT32_PROMPTS, C_PROMPT_KERNELS)  # each for its dtype: at most one fits
DECODE_STEPS: tuple[FastPath, ...] = (C_DECODE_STEP, COMPILED_DECODE_STEP)  # tried in turn; the first kept serves
DECODE_STEP_WORDS = {"C": "decode step in C (hand-written, one OpenMP region)",
                     "torch.compile": "decode step compiled (torch.compile)"}


def label(backends: Backends) -> str:
    """What a fast model's passes run, in words (the sidebar and the Trace), from its backends."""
    matmuls = backends.ops.choice.label() if isinstance(backends.ops, MatmulKernels) else "plain F.linear"
    parts = [matmuls if matmuls.startswith("fast") else f"fast: {matmuls}"]
    if backends.prompt_pass is not None:
        parts.append("prompts in float32 (widened copy)")
    if backends.prompt_ops is not None:
        parts.append("prompts' attention, norms and SwiGLU in C")
    if backends.decode_step is not None:
        parts.append(DECODE_STEP_WORDS[backends.decode_step.kind])
    return "; ".join(parts)


def with_kernels(lm, kernels: str, cache_dir: Path | None = None, remeasure: bool = False, decode_step: bool = True):
    """`lm` running the asked kernels: `lm` itself when it already does, else the same model with other Backends.

    fast on CPU measures what it has not measured on this machine yet (remeasure=True: everything again), then the
    decode step (`with_decode_step`; decode_step=False leaves that to the caller, e.g. a background thread)."""
    if kernels not in KERNELS:
        raise ValueError(f"unknown kernels '{kernels}'; use one of {', '.join(KERNELS)}")
    if kernels == lm.kernel_choice and not remeasure:
        return lm
    if kernels == "plain":
        return replace(lm, backends=EAGER, kernels="plain", kernel_choice="plain", kernel_why="")
    if forced := forced_plain():
        return replace(lm, backends=EAGER, kernels=f"plain ({forced})", kernel_choice="fast", kernel_why=forced)
    if lm.device.type != "cpu":
        library = "cuBLAS" if lm.device.type == "cuda" else "Metal"
        return replace(lm, backends=EAGER, kernels=f"plain ({library} already; fast = plain on {lm.device.type})",
                       kernel_choice="fast", kernel_why="")
    choice = choose(lm.model, lm.dtype, cache_dir, remeasure)
    fast = replace(lm, backends=Backends(ops=MatmulKernels(lm.model, choice)), kernel_choice="fast",
                   kernel_why=choice.why())
    for path in PROMPT_PATHS:
        fast = _tried(path, fast, cache_dir, remeasure)[0]
    fast = replace(fast, kernels=label(fast.backends))
    return with_decode_step(fast, cache_dir, remeasure) if decode_step else fast


def with_decode_step(fast, cache_dir: Path | None = None, remeasure: bool = False):
    """`fast` with a batch-1 decode step measured faster here than the eager loop (the first of DECODE_STEPS kept),
    else `fast` with what was measured. A new LoadedModel: a run going on `fast` keeps the step it started with."""
    if (fast.kernel_choice != "fast" or fast.backends.decode_step is not None or fast.device.type != "cpu"
            or forced_plain()):
        return fast
    for path in DECODE_STEPS:
        fast, verdict = _tried(path, fast, cache_dir, remeasure)
        if fast.backends.decode_step is not None:
            break
        if verdict is not None and verdict.disturbed:  # a loss other programs may have made: raced again at the
            break  # next load, before anything costlier (torch.compile: seconds to minutes on a busy machine) is tried
    return replace(fast, kernels=label(fast.backends))


def _tried(path: FastPath, lm, cache_dir: Path | None, remeasure: bool):
    """(`lm` with `path` decided here: attached where it won, and its verdict or why it cannot serve in the why;
    the verdict, None where it cannot serve)."""
    fit = path.fit(lm, lm.backends)
    if not fit.ok:
        said = _and(lm.kernel_why, f"{path.name}: not here ({fit.why_not})")
        return (replace(lm, kernel_why=said) if fit.said else lm), None
    backends, verdict = decide(path, lm, lm.backends, cache_dir, remeasure)
    return replace(lm, backends=backends, kernel_why=_and(lm.kernel_why, verdict.words(path))), verdict


def prebuild(device, kernels: str, cache_dir: Path | None = None):
    """Start building the C libraries a fast load on this CPU may use (a thread; None where none will be): called
    before the weights are read, joined before anything is timed, so a first load's compiling overlaps its reading."""
    if kernels != "fast" or device.type != "cpu" or forced_plain():
        return None
    return c_build.prebuild(cache_dir or default_cache_dir(), [c_decode.SOURCE, prompt_kernels.SOURCE])


def builds_decode_step(lm) -> bool:
    """Whether `with_decode_step` may build a decode step for this model here (seconds: worth saying, and serving
    the fast kernels meanwhile)."""
    return (lm.kernel_choice == "fast" and lm.device.type == "cpu" and not forced_plain()
            and any(path.fit(lm, lm.backends).ok for path in DECODE_STEPS))


def without_decode_step(lm):
    """`lm` with its decode steps on the eager loop (the same model, its other fast paths kept)."""
    if lm.backends.decode_step is None:
        return lm
    backends = replace(lm.backends, decode_step=None)
    return replace(lm, backends=backends, kernels=label(backends) + "; decode step eager")


def _and(why: str, more: str) -> str:
    """The kernels' why with one more clause."""
    return f"{why}; {more}" if why else more
