"""What runs each forward pass: the eager reference, or fast paths chosen once when the model is loaded.

A loaded model holds ONE `Backends`. Plain (`EAGER`) and fast share the same module tree and the same weights;
only this object differs. engine/techniques/kernels.py makes the fast one: it measures each fast path on this
machine against what would run without it and keeps only the winners (engine/techniques/fast_paths.py).

  ops          what every layer calls: the linear layers' matmul kernel, the norms, SwiGLU (`TorchOps`: torch's
               own ops, the reference; engine/techniques/matmul_kernels.py's `MatmulKernels`: library kernels timed here)
  prompt_ops   a wide prompt's work between its matmuls in one C call a piece (prompt_kernels.py), where it serves
  decode_step  a whole batch-1 decode step in one call (the C step, or torch.compile's), where it serves
  prompt_pass  a half-precision model's wide passes through a float32 copy of its weights (prompt_pass.py)
  flat_decode  decode steps through `Transformer.decode_rows`: the blocks' maths as one flat loop, the same bits

`run_pass` is the one place that decides which of them a pass takes. A pass with hooks on its blocks (the profiling
lab) runs the model's own modules with the matmul kernels; a pass that captures attention runs the blocks too (a
captured layer takes torch's explicit attention), so what is watched is what is there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from engine.core.kv_cache import KVCache, Plan, RaggedPlan

WIDE_PASS = 8  # passes of more tokens than this (prompts, prompt chunks) are "wide": prompt_ops and prompt_pass serve them


class TorchOps:
    """The reference ops every layer calls: torch's linear, norm and SwiGLU. Fast ops subclass it and replace some."""

    name = "torch"
    fused_attention = False  # True: `attention` does RoPE, the cache write and causal attention in one call

    def record(self) -> str | dict:
        """What the Trace keeps of these ops (engine/core/recorder.py)."""
        return self.name

    def linear(self, m, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) -> (..., out): the product with the layer's weight, plus its bias."""
        return F.linear(x, m.weight, m.bias)

    def norm(self, norm, x: torch.Tensor) -> torch.Tensor:
        return norm(x)

    def add_norm(self, x: torch.Tensor, a: torch.Tensor, norm) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual add, then the norm of its result: (x + a, norm(x + a))."""
        x = x + a
        return x, norm(x)

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """SwiGLU's SiLU(gate) * up from the fused projection's output (..., 2F) -> (..., F)."""
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    def attention(self, qkv: torch.Tensor, rope: tuple, layer: int, cache: KVCache, plan: Plan) -> torch.Tensor:
        raise NotImplementedError("torch's attention runs inside Attention.forward")


TORCH = TorchOps()


class DecodeStep(Protocol):
    """A whole batch-1 decode step in one call: ids (1, 1) -> logits (1, V), as `Transformer.decode_rows`."""

    kind: str  # what the Trace records: "C" or "torch.compile"
    fallbacks: int  # steps it could not serve (another cache layout), run by the eager loop instead

    def serves(self, cache: KVCache, plan: Plan) -> bool: ...

    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> torch.Tensor: ...


class PromptOps(Protocol):
    """Ops for a wide prompt (TorchOps's methods, `fused_attention` True), where `serves` says they can."""

    name: str

    def serves(self, ids: torch.Tensor, cache: KVCache, plan: Plan) -> bool: ...


class PromptPass(Protocol):
    """A wide pass run elsewhere (a float32 copy of the weights): same arguments and logits as the model's own."""

    def __call__(self, ids: torch.Tensor, cache: KVCache, plan: Plan, all_logits: bool) -> torch.Tensor: ...


@dataclass(frozen=True)
class Backends:
    """The fast paths of one loaded model, chosen once at load; every field at its default is the eager reference."""

    ops: TorchOps = TORCH
    prompt_ops: PromptOps | None = None
    decode_step: DecodeStep | None = None
    prompt_pass: PromptPass | None = None
    flat_decode: bool = True
    pending: str = ""  # what was still being built in the background when a model with these was handed out (the
    # dashboard's fast start, engine/serving/scheduling/model_pool.py): that work shares the run's cores; "" none

    def record(self) -> dict:
        """What the Trace keeps of this choice: each path's kind, as data (engine/core/recorder.py)."""
        kinds = {"matmuls": self.ops.record(), "prompt_ops": self.prompt_ops.name if self.prompt_ops else "torch",
                 "decode_step": self.decode_step.kind if self.decode_step else ("flat loop" if self.flat_decode else "blocks"),
                 "prompt_pass": "float32 copy" if self.prompt_pass is not None else "own dtype"}
        return kinds | ({"pending": self.pending} if self.pending else {})

    def fallbacks(self) -> int:
        """Decode steps its decode step handed to the eager loop so far (0 without one)."""
        return self.decode_step.fallbacks if self.decode_step is not None else 0


EAGER = Backends()


def hooked(model) -> bool:
    """Whether hooks watch the blocks (the profiling lab labels attention and MLP): then the modules must run."""
    first = model.blocks[0]
    return bool(first.attn._forward_pre_hooks or first.attn._forward_hooks or first.mlp._forward_pre_hooks
                or model.lm_head._forward_pre_hooks)


def is_decode_step(model, T: int, plan, all_logits: bool) -> bool:
    """One token per row, every row at the same position, plain causal reading, the next token's logits only:
    the pass `decode_rows` and a `DecodeStep` take (Llama family: RoPE)."""
    return (T == 1 and not isinstance(plan, RaggedPlan) and isinstance(plan.positions, slice) and plan.mask is None
            and not all_logits and model.cfg.uses_rope)


def run_pass(model, backends: Backends, ids: torch.Tensor, cache: KVCache, *, plan: Plan | RaggedPlan | None = None,
             all_logits: bool = False, capture_layers: tuple[int, ...] = (), on_probs=None, last_layer: int | None = None,
             ) -> tuple[torch.Tensor | None, dict[int, torch.Tensor]]:
    """One forward pass of `model` (the arguments of `Transformer.forward`) through the path `backends` has for it."""
    B, T = ids.shape
    plan = plan if plan is not None else cache.plan(T)
    model.check_pass(ids, plan, capture_layers, on_probs)
    hooks = hooked(model)  # the modules themselves must run, each one
    whole = not hooks and not capture_layers and on_probs is None and last_layer is None  # a whole-pass path may serve
    if whole and is_decode_step(model, T, plan, all_logits):
        step = backends.decode_step
        if step is not None and B == 1:
            if step.serves(cache, plan):
                return step(ids, cache, plan), {}
            step.fallbacks += 1  # counted: the run's Trace says how many of its steps ran the eager loop
        if backends.flat_decode:
            return model.decode_rows(ids, cache, plan, backends.ops), {}
    ops = backends.ops
    if not hooks and B * T > WIDE_PASS:
        if whole and backends.prompt_pass is not None:
            return backends.prompt_pass(ids, cache, plan, all_logits), {}
        if backends.prompt_ops is not None and backends.prompt_ops.serves(ids, cache, plan):
            ops = backends.prompt_ops  # a layer whose attention is captured runs torch's explicit attention there
    return model(ids, cache, plan=plan, all_logits=all_logits, capture_layers=capture_layers, on_probs=on_probs,
                 last_layer=last_layer, ops=ops)

