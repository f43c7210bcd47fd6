"""Which matmul kernels the linear layers run: `plain` (nn.Linear, the readable teaching path) or `fast`.

A decode step reads every weight once, so it is bound by how well the matmul kernel streams the
weights, not by the arithmetic. `fast` keeps the same weights and the same maths and only changes
how they are read: library kernels for the matmuls, chosen on CPU by measuring them on this
machine at this model's shapes, per phase (kernel_choice.py; the candidates: kernel_candidates.py).
Plain F.linear is always a candidate and wins ties, so fast is never slower than plain.

  cpu            the fastest measured candidate for decode (rows <= WIDE_ROWS), for prompts and for long
                 prompts (LONG_FROM rows or more): oneDNN prepacked won decode and 128-token prompts on a
                 2-core AVX2 EPYC and MKL's plain GEMM its 1024-token prompts; plain F.linear (MKL, at the
                 memory's speed) won decode on an AVX-512 Xeon. bfloat16 may widen to float32 for prompts.
  cuda / mps     the vendor library (cuBLAS / MPS) is already what nn.Linear calls: fast = plain;
                 on CUDA the decode remedy is CUDA graphs (engine/techniques/cuda_graphs.py).

A bfloat16/float16 model on CPU may also run its prompts (passes wider than WIDE_ROWS tokens) in float32 from a
widened copy of its weights (prompt_pass.py), measured against its own prompt pass at first load and kept only where
faster: on CPUs without bfloat16 arithmetic.

On top of the matmul choice, a batch-1 decode step on CPU may run as code torch.compile generated for one layer
(compiled_decode.py), measured against the eager loop at first load, and then as one hand-written C loop nest for
the whole step (c_decode.py, float32 or bfloat16), measured against whichever of those two won: each kept only
where faster, the verdicts cached. A float32 prompt's work between its matmuls (norms, RoPE, the cache write, causal
attention, SwiGLU) may run as three hand-written C kernels (prompt_kernels.py), measured the same way.
Tried and left out: torch.compile of the whole model with weight freezing (it turns the matmuls back into the
same oneDNN calls; 37-100 s to compile on 2 cores, in every worker process); fp16 weights through FBGEMM (half
the bytes, but it changes the numbers: that is quantisation, a different remedy).

The fast model is a twin of the plain one: it shares every parameter (a packed layout is one extra
copy of the matrices), and `with_kernels(fast_lm, "plain")` gives the plain model back.
"""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import torch
from torch import nn

from engine.core.model import DECODE_STEP_LABELS, WIDE_PASS
from engine.techniques import c_decode, compiled_decode, prompt_kernels, prompt_pass
from engine.techniques.kernel_candidates import apply, prepare
from engine.techniques.kernel_choice import LONG_FROM, LONG_ROWS, PREFILL_ROWS, Choice, choose

KERNELS = ("plain", "fast")
COMPILED_LABEL = DECODE_STEP_LABELS[0]  # what a fast model's kernels add when it runs one
C_LABEL = DECODE_STEP_LABELS[1]  # ... or when it runs the C step
WIDE_ROWS = WIDE_PASS  # up to this many rows (decode steps, small batches) run the decode kernel; wider ones the prompt
PROMPT_LABEL = "; prompts in float32 (widened copy)"  # what a half-precision fast model's kernels add when it runs one
PROMPT_C_LABEL = "; prompts' attention, norms and SwiGLU in C"  # ... or when it runs prompt_kernels.py's


class ChosenLinear(nn.Module):
    """nn.Linear through the kernels measured fastest here: one for decode's few rows, one for prompts, one for long
    prompts (LONG_FROM rows or more)."""

    def __init__(self, linear: nn.Linear, decode: str, prefill: str, prefill_long: str | None = None):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # shared with the plain model: weight_bytes, and the way back to plain
        self.bias = linear.bias
        self.decode, self.prefill, self.prefill_long = decode, prefill, prefill_long or prefill
        self.decode_extras = prepare(decode, linear.weight, 1)  # e.g. a packed copy (opaque); () for plain
        self.prefill_extras = self._extras(prefill, PREFILL_ROWS, [(decode, self.decode_extras)])
        self.long_extras = self._extras(self.prefill_long, LONG_ROWS,
                                        [(decode, self.decode_extras), (prefill, self.prefill_extras)])

    def _extras(self, kernel: str, rows: int, made: list[tuple[str, tuple]]) -> tuple:
        """A kernel's extras, shared with a phase that already made them (MKL packs for a number of rows: its own)."""
        for other, extras in made:
            if other == kernel and kernel != "mkl-packed":
                return extras
        return prepare(kernel, self.weight, rows)

    def extras(self) -> list[torch.Tensor]:
        return [*self.decode_extras, *self.prefill_extras, *self.long_extras]  # shared ones twice: _twin keys by id

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)  # (M, K), M = B * T
        rows = x2.shape[0]
        if rows <= WIDE_ROWS:
            y = apply(self.decode, x2, self.weight, self.bias, self.decode_extras)  # (M, N)
        elif rows < LONG_FROM:
            y = apply(self.prefill, x2, self.weight, self.bias, self.prefill_extras)  # (M, N)
        else:
            y = apply(self.prefill_long, x2, self.weight, self.bias, self.long_extras)  # (M, N)
        return y.view(*x.shape[:-1], self.out_features)  # (..., N)


FAST_LINEARS = (ChosenLinear,)  # what replaces nn.Linear on the fast path


def fast_path(lm, cache_dir: Path | None = None, remeasure: bool = False) -> tuple[Choice | None, str, str]:
    """(the measured choice, or None where fast = plain; a label saying what the matmuls run; why)."""
    if lm.device.type != "cpu":
        library = "cuBLAS" if lm.device.type == "cuda" else "Metal"
        return None, f"plain ({library} already; fast = plain on {lm.device.type})", ""
    choice = choose(lm.model, lm.dtype, cache_dir, remeasure)
    return choice, choice.label(), choice.why()


def _swap(parent: nn.Module, make) -> None:
    for name, child in parent.named_children():
        replacement = make(child)
        if replacement is not None:
            setattr(parent, name, replacement)
        else:
            _swap(child, make)


def _twin(model: nn.Module, make) -> nn.Module:
    """A copy of `model` sharing every parameter and buffer, with modules replaced where make(m) is not None."""
    extras = [t for m in model.modules() if isinstance(m, ChosenLinear) for t in m.extras()]  # opaque: cannot be copied
    shared = {id(t): t for t in [*model.parameters(), *model.buffers(), *extras]}
    shared[id(model.prompt_pass)] = model.prompt_pass  # a float32 prompt pass is shared by reference, never copied
    shared[id(model.prompt_kernels)] = model.prompt_kernels  # so are the prompts' C kernels (a loaded library)
    compiled, model.compiled_decode = model.compiled_decode, None  # compiled code belongs to its model alone
    try:
        twin = copy.deepcopy(model, shared)  # new module objects, the same tensors
    finally:
        model.compiled_decode = compiled
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


def with_kernels(lm, kernels: str, cache_dir: Path | None = None, remeasure: bool = False, compile_decode: bool = True):
    """`lm` running the asked kernels: `lm` itself when it already does, else a twin sharing its weights.

    fast on CPU measures the candidates at first use on this machine (cached in cache_dir's kernel-choice.json;
    remeasure=True measures again), then the compiled decode step (`with_compiled_decode`; compile_decode=False
    leaves that to the caller, e.g. a background thread)."""
    if kernels not in KERNELS:
        raise ValueError(f"unknown kernels '{kernels}'; use one of {', '.join(KERNELS)}")
    if kernels == lm.kernel_choice and not remeasure:
        return lm
    if kernels == "plain":
        model = _twin(lm.model, _plain_linear)
        model.prompt_pass = None  # plain: the model's own dtype all the way
        model.prompt_kernels = None  # ... and torch's ops
        return dataclasses.replace(lm, model=model, kernels="plain", kernel_choice="plain", kernel_why="")
    base = with_kernels(lm, "plain") if lm.kernel_choice != "plain" else lm  # measure on (and swap) nn.Linear layers
    choice, label, why = fast_path(base, cache_dir, remeasure)
    if choice is None or (choice.decode, choice.prefill, choice.long) == ("plain", "plain", "plain"):
        model = base.model
    else:
        model = _twin(base.model, lambda m: ChosenLinear(m, choice.decode, choice.prefill, choice.long)
                      if isinstance(m, nn.Linear) else None)
    fast = dataclasses.replace(base, model=model, kernels=label, kernel_choice="fast", kernel_why=why)
    fast = with_prompt_pass(fast, base, cache_dir, remeasure)
    return with_compiled_decode(fast, cache_dir, remeasure) if compile_decode else fast


def with_prompt_pass(fast, plain, cache_dir: Path | None = None, remeasure: bool = False):
    """A half-precision `fast` with its prompts in float32 from a widened copy (a twin) where that was measured faster
    here (prompt_pass.py), else `fast` with the measured why."""
    if prompt_pass.applicable(fast.dtype, fast.device):
        return fast
    model = _twin(fast.model, lambda m: None)  # never the plain model itself (fast = plain where plain won)

    def kernels32(model32):  # the float32 kernels measured for prompts here (decode never reaches the copy)
        choice = fast_path(dataclasses.replace(plain, model=model32, dtype=torch.float32), cache_dir)[0]
        if choice is None or (choice.prefill, choice.long) == ("plain", "plain"):
            return model32
        _swap(model32, lambda m: ChosenLinear(m, "plain", choice.prefill, choice.long) if isinstance(m, nn.Linear) else None)
        return model32

    verdict = prompt_pass.attach(model, plain.model, fast.dtype, kernels32, cache_dir, remeasure)
    label = fast.kernels + (PROMPT_LABEL if model.prompt_pass is not None else "")
    return dataclasses.replace(fast, model=model if model.prompt_pass is not None else fast.model, kernels=label,
                               kernel_why=_and(fast.kernel_why, verdict.words()))


def with_compiled_decode(fast, cache_dir: Path | None = None, remeasure: bool = False):
    """`fast` with a batch-1 decode step measured faster here, else `fast`: the hand-written C step (c_decode.py)
    where it beat the step that would run otherwise, else torch.compile's layer (compiled_decode.py) where it beat
    the eager loop. And with its prompts' work between the matmuls in C where measured faster (`with_prompt_kernels`).

    A twin (new module objects, the same tensors), so a run already going on `fast` keeps the step it started with."""
    return with_prompt_kernels(_with_decode_step(fast, cache_dir, remeasure), cache_dir, remeasure)


def with_prompt_kernels(fast, cache_dir: Path | None = None, remeasure: bool = False):
    """`fast` with its float32 prompts' attention, norms and SwiGLU in hand-written C (prompt_kernels.py) where
    measured faster here, a twin; else `fast`, with the verdict's why."""
    if prompt_kernels.applicable(fast.model, fast.dtype, fast.device):
        return fast
    model = _twin(fast.model, lambda m: None)
    # the twin replaces no module, so the decode step `fast` chose (it reads the same tensors) serves it as well:
    # _twin leaves it behind, and without it every decode step ran eager (2.5x slower, unseen behind its label)
    model.compiled_decode = fast.model.compiled_decode
    verdict = prompt_kernels.attach(model, fast.dtype, cache_dir, remeasure)
    label = fast.kernels + (PROMPT_C_LABEL if model.prompt_kernels is not None else "")
    return dataclasses.replace(fast, model=model if model.prompt_kernels is not None else fast.model, kernels=label,
                               kernel_why=_and(fast.kernel_why, verdict.words()))


def _with_decode_step(fast, cache_dir: Path | None = None, remeasure: bool = False):
    reason = compiled_decode.applicable(fast.model, fast.device)  # '' where a compiled decode step may serve
    c_reason = c_decode.applicable(fast.model, fast.dtype, fast.device)  # '' where the C step may serve
    if reason == compiled_decode.NO_COMPILER and c_reason:  # the one reason a user can act on: said beside the why
        return dataclasses.replace(fast, kernel_why=_and(fast.kernel_why, f"decode step eager: {reason}"))
    if reason and c_reason:
        return fast
    model = _twin(fast.model, lambda m: None)
    label, why = fast.kernels, fast.kernel_why
    won = None if c_reason else c_decode.attach(model, fast.dtype, cache_dir, remeasure, only_if_won=True)
    if won is not None and won.use:  # the C step won here before: torch.compile's layer is never built
        return dataclasses.replace(fast, model=model, kernels=label + C_LABEL, kernel_why=_and(why, won.words()))
    if not reason:
        verdict = compiled_decode.attach(model, fast.dtype, fast.device, cache_dir, remeasure)
        label, why = label + (COMPILED_LABEL if verdict.use else ""), _and(why, verdict.words())
    c_verdict = None if c_reason else c_decode.attach(model, fast.dtype, cache_dir, remeasure)
    if c_verdict is not None:
        why = _and(why, c_verdict.words())
        if c_verdict.use:
            label = label.replace(COMPILED_LABEL, "") + C_LABEL
    return dataclasses.replace(fast, model=model, kernels=label, kernel_why=why)


def builds_decode_step(model, dtype: torch.dtype, device: torch.device) -> bool:
    """Whether `with_compiled_decode` may build a decode step for this model (seconds: worth saying, and serving the
    fast kernels meanwhile)."""
    return not (compiled_decode.applicable(model, device) and c_decode.applicable(model, dtype, device)
                and prompt_kernels.applicable(model, dtype, device))


def _and(why: str, more: str) -> str:
    """The kernels' why with one more clause."""
    return f"{why}; {more}" if why else more


def without_compiled_decode(lm):
    """`lm` with its decode steps eager (a twin) where it has a compiled one, else `lm` itself."""
    if getattr(lm.model, "compiled_decode", None) is None:
        return lm
    label = lm.kernels.replace(COMPILED_LABEL, "").replace(C_LABEL, "").replace(PROMPT_C_LABEL, "") + "; decode step eager"
    label += PROMPT_C_LABEL if lm.model.prompt_kernels is not None else ""
    return dataclasses.replace(lm, model=_twin(lm.model, lambda m: None), kernels=label)
