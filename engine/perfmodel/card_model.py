"""One performance model of a card: (model, card, dtype, batch, prompt and output lengths, context) -> time per pass.

A forward pass on one card of a tensor-parallel group of g cards:

  compute  = FLOPs / g / (matmul FLOP/s x MFU)        (engine/perfmodel/flops.py; matmul FLOP/s: the card's MAMF)
  memory   = bytes / g / (bandwidth x MBU)            every weight once + the KV cache read (decode) or written
  roof     = (compute^p + memory^p)^(1/p)             the roofline with a soft corner (cards.OVERLAP)
  launches = layer_s x layers                         hidden behind the roof unless the device finishes first
  comm     = 2 x layers x (latency(g) + 2(g-1)/g x activations / link)   two all-reduces per layer (g > 1 only)
  time     = max(roof, launches) + pass_s + comm      pass_s: sampling and bookkeeping, which nothing hides

MFU, MBU and the overheads belong to the card's class (engine/perfmodel/cards.py), fitted on published measurements
and checked against others; what follows from the model, and its checks: docs/performance-model.md. Pure arithmetic.
References: Williams, Waterman & Patterson, "Roofline" (2009); Pope et al., "Efficiently Scaling Transformer
Inference" (2022); Databricks, "LLM Inference Performance Engineering: Best Practices" (2023) for MBU.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from engine.core.config import ModelConfig
from engine.errors import EngineError
from engine.perfmodel import cards as cd
from engine.perfmodel.flops import decode_step_flops, prefill_flops


@dataclass(frozen=True)
class Format:
    bytes_per_weight: float
    kv_bytes: int  # per KV element
    compute: str  # which peak of the card the matmuls run at ("fp32", "fp16", "fp8")
    activation_bytes: int  # per activation element (what an all-reduce moves)
    note: str = ""


DTYPES: dict[str, Format] = {
    "float32": Format(4, 4, "fp32", 4),
    "float16": Format(2, 2, "fp16", 2),
    "bfloat16": Format(2, 2, "fp16", 2),
    "fp8": Format(1, 1, "fp8", 2, "fp8 weights, activations and KV cache (W8A8, as TensorRT-LLM's fp8 engines)"),
    "q8_0": Format(34 / 32, 2, "fp16", 2, "llama.cpp's Q8_0: 8-bit weights + a 2-byte scale per 32; math in fp16"),
    "q4_0": Format(18 / 32, 2, "fp16", 2, "llama.cpp's Q4_0: 4-bit weights + a 2-byte scale per 32; math in fp16"),
}


@dataclass(frozen=True)
class Setup:
    """A model on g cards of one kind, in one number format."""
    model: ModelConfig
    card: cd.Card
    dtype: str = "float16"
    gpus: int = 1
    model_name: str = ""

    @property
    def fmt(self) -> Format:
        if self.dtype not in DTYPES:
            raise EngineError(f"unknown dtype '{self.dtype}'; valid: {', '.join(DTYPES)}")
        return DTYPES[self.dtype]

    @property
    def weight_bytes(self) -> float:
        """All the model's weights, on all cards together."""
        return self.model.weight_bytes(self.fmt.bytes_per_weight)

    @property
    def kv_bytes_per_token(self) -> float:
        """One token of one sequence in the KV cache, on all cards together."""
        return float(self.model.kv_bytes_per_token(self.fmt.kv_bytes))

    @property
    def usable_bytes(self) -> float:
        return self.gpus * self.card.memory_bytes * self.card.param("usable_memory").value

    def check(self) -> Setup:
        fmt = self.fmt
        self.card.peak(fmt.compute)
        if not isinstance(self.gpus, int) or isinstance(self.gpus, bool) or self.gpus < 1:
            raise EngineError(f"the number of cards must be a whole number >= 1, not {self.gpus!r}")
        if self.gpus > 1 and not self.card.link_bytes_per_s > 0:
            raise EngineError(f"{self.card.name} is one chip: it cannot be split over {self.gpus} (use --gpus 1)")
        if self.gpus > 1 and self.model.n_heads % self.gpus:
            raise EngineError(f"tensor parallelism splits the {self.model.n_heads} attention heads: {self.gpus} cards "
                              "do not divide them")
        if self.weight_bytes > self.usable_bytes:
            need = self.weight_bytes / (self.card.memory_bytes * self.card.param("usable_memory").value)
            more = 2 ** math.ceil(math.log2(max(need, 1)))
            hint = (f"; try --gpus {more}" if self.card.link_bytes_per_s > 0 and self.model.n_heads % more == 0
                    else "; try a smaller dtype or a bigger card")
            raise EngineError(f"{self.model_name or 'the model'} in {self.dtype} ({self.weight_bytes / 1e9:.1f} GB of "
                              f"weights) does not fit in {self.gpus} x {self.card.memory_bytes / 1e9:.0f} GB "
                              f"({self.card.name}, {self.card.param('usable_memory').value:.0%} usable){hint}")
        return self


@dataclass(frozen=True)
class Pass:
    """One forward pass on one card of the group: its work, its traffic and where its time goes."""
    flops: float  # per card
    bytes: float  # per card
    compute_s: float
    memory_s: float
    roof_s: float  # the soft roofline of compute and memory: the device's own time
    overhead_s: float  # host time the device's work does not hide: launches beyond it, plus the fixed per-pass work
    comm_s: float  # tensor parallelism's all-reduces
    tokens: int  # tokens computed (all sequences)

    @property
    def seconds(self) -> float:
        return self.roof_s + self.overhead_s + self.comm_s

    @property
    def bound(self) -> str:
        """What limits the pass: 'overhead' when launches and host work outlast the roofline's time."""
        if self.overhead_s + self.comm_s >= self.roof_s:
            return "overhead"
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def intensity(self) -> float:
        """FLOP per byte moved."""
        return self.flops / self.bytes


def _pass(setup: Setup, flops: float, nbytes: float, tokens: int) -> Pass:
    c, g, fmt = setup.card, setup.gpus, setup.fmt
    compute = flops / g / (c.matmul(fmt.compute) * c.param("mfu").value)
    memory = nbytes / g / (c.bytes_per_s * c.param("mbu").value)
    p = cd.OVERLAP.value
    top = max(compute, memory)
    device = top * ((compute / top) ** p + (memory / top) ** p) ** (1 / p) if top > 0 else 0.0
    layers = setup.model.n_layers
    launches = c.param("layer_s").value * layers  # the host issues a pass's kernels while earlier ones run
    fixed = c.param("pass_s").value  # sampling, the step's bookkeeping: nothing overlaps it
    comm = 0.0
    if g > 1:
        latency = c.param("allreduce_s").value + c.param("allreduce_doubling_s").value * (math.log2(g) - 1)
        message = tokens * setup.model.d_model * fmt.activation_bytes
        comm = 2 * layers * (latency + 2 * (g - 1) / g * message / c.link_bytes_per_s)
    busy = max(device, launches)
    return Pass(flops / g, nbytes / g, compute, memory, device, busy - device + fixed, comm, tokens)


def prefill(setup: Setup, tokens: int, batch: int = 1) -> Pass:
    """B prompts of T tokens in one pass: every weight read once, the KV cache written once."""
    _positive(tokens=tokens, batch=batch)
    flops = prefill_flops(setup.model, tokens, batch).total
    nbytes = setup.weight_bytes + batch * tokens * setup.kv_bytes_per_token
    return _pass(setup, flops, nbytes, batch * tokens)


def decode_step(setup: Setup, context: int, batch: int = 1) -> Pass:
    """One token for each of B sequences whose caches hold `context` tokens (the new one included)."""
    _positive(context=context, batch=batch)
    flops = decode_step_flops(setup.model, context, batch)
    nbytes = setup.weight_bytes + batch * context * setup.kv_bytes_per_token
    return _pass(setup, flops, nbytes, batch)


def mixed_step(setup: Setup, tokens: int, kv_tokens: int, pairs: float, rows: int = 1) -> Pass:
    """A serving step that computes `tokens` tokens (prompt chunks and decode rows alike) whose rows hold `kv_tokens`
    cached tokens after it, whose attention scores `pairs` query-key pairs and where `rows` sequences emit a token
    (their logits): the fleet simulator's step."""
    cfg = setup.model
    flops = 2.0 * cfg.matmul_params * tokens + 4.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * pairs
    flops += 2.0 * cfg.lm_head_params * max(rows, 1)
    nbytes = setup.weight_bytes + kv_tokens * setup.kv_bytes_per_token
    return _pass(setup, flops, nbytes, max(tokens, 1))


def _positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise EngineError(f"the {name.replace('_', ' ')} must be a whole number >= 1, not {v!r}")


def smallest(ok, low: int, high: int) -> int | None:
    """The smallest n in low..high with ok(n), ok being monotone: doubling, then halving."""
    n = low
    while not ok(n):
        if n >= high:
            return None
        n = min(high, max(n + 1, 2 * n))
    lo = max(low, n // 2 + 1) if n > low else low
    while lo < n:
        mid = (lo + n) // 2
        if ok(mid):
            n = mid
        else:
            lo = mid + 1
    return n


def crossover_prompt(setup: Setup, batch: int = 1, high: int = 1 << 22) -> int | None:
    """The shortest prompt whose prefill is compute-bound (its compute time reaches its memory time)."""
    return smallest(lambda t: (p := prefill(setup, t, batch)).compute_s >= p.memory_s, 1, high)


def crossover_batch(setup: Setup, context: int, high: int = 1 << 16) -> int | None:
    """The smallest batch whose decode step at `context` is compute-bound; None when the KV cache keeps it below
    (its reads grow with the batch as fast as the FLOPs do)."""
    return smallest(lambda b: (p := decode_step(setup, context, b)).compute_s >= p.memory_s, 1, high)


def max_sequences(setup: Setup, tokens_per_sequence: int, mha: bool = False) -> int:
    """How many sequences of this length the cards' memory holds beside the weights: (memory - weights) / KV per
    sequence. `mha`: the same model with one KV head per query head (no grouped-query attention), for comparison."""
    cfg = dataclasses.replace(setup.model, n_kv_heads=setup.model.n_heads) if mha else setup.model
    per_sequence = cfg.kv_bytes_per_token(setup.fmt.kv_bytes) * tokens_per_sequence
    room = setup.usable_bytes - setup.weight_bytes
    return max(0, int(room // per_sequence)) if per_sequence > 0 else 0


@dataclass(frozen=True)
class Cost:
    """Device-seconds one request costs, by stage, at a batch: g cards x the pass time / the sequences sharing it."""
    batch: int
    prefill_s: float
    decode_s: float

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s

    @property
    def prefill_share(self) -> float:
        return self.prefill_s / self.total_s if self.total_s > 0 else float("nan")

    def dollars(self, price_per_hour: float) -> float:
        return self.total_s / 3600.0 * price_per_hour


def cost(setup: Setup, prompt: int, output: int, batch: int) -> Cost:
    """A prefill's cost does not shrink with batching once it is compute-bound; a decode step's is shared by the B
    riders until the step itself turns compute-bound."""
    pre = prefill(setup, prompt, batch).seconds * setup.gpus / batch
    steps = max(output - 1, 0)
    dec = steps * decode_step(setup, prompt + max(output, 1) // 2, batch).seconds * setup.gpus / batch if steps else 0.0
    return Cost(batch, pre, dec)


@dataclass(frozen=True)
class RequestPlan:
    setup: Setup
    prompt: int
    output: int
    batch: int
    context: int  # the decode step's context (default: the mean over the output)
    prefill: Pass
    decode: Pass
    first_step: Pass
    last_step: Pass

    @property
    def ttft_s(self) -> float:
        return self.prefill.seconds

    @property
    def tpot_s(self) -> float:
        return self.decode.seconds

    @property
    def total_s(self) -> float:
        return self.ttft_s + max(self.output - 1, 0) * self.tpot_s

    @property
    def prefill_share(self) -> float:
        return self.ttft_s / self.total_s if self.total_s > 0 else float("nan")


def plan(setup: Setup, prompt: int, output: int, batch: int = 1, context: int | None = None) -> RequestPlan:
    """TTFT and TPOT of B requests of `prompt` tokens in and `output` out, served together."""
    setup.check()
    _positive(prompt_tokens=prompt, batch=batch)
    if not isinstance(output, int) or isinstance(output, bool) or output < 0:
        raise EngineError(f"the output tokens must be a whole number >= 0, not {output!r}")
    ctx = context if context is not None else prompt + max(output, 1) // 2
    _positive(context=ctx)
    limit = setup.model.max_seq_len
    if prompt + output > limit:
        raise EngineError(f"{prompt} + {output} tokens exceed {setup.model_name or 'the model'}'s context window "
                          f"({limit:,} tokens)")
    need = setup.weight_bytes + batch * (prompt + output) * setup.kv_bytes_per_token
    if need > setup.usable_bytes:
        most = max_sequences(setup, prompt + output)
        raise EngineError(f"{batch} sequences of {prompt + output} tokens need {need / 1e9:.1f} GB with the weights; "
                          f"{setup.gpus} x {setup.card.name} hold {most} of them")
    return RequestPlan(setup, prompt, output, batch, ctx, prefill(setup, prompt, batch), decode_step(setup, ctx, batch),
                       decode_step(setup, prompt + 1, batch), decode_step(setup, prompt + max(output, 1), batch))
