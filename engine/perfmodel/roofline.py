"""Roofline arithmetic: FLOPs and bytes of prefill and decode, hardware and model presets, TTFT/TPOT estimates.

Arithmetic intensity = FLOPs / bytes moved. Prefill does 2·params FLOPs per prompt token on ONE read
of the weights (intensity grows with T); decode does 2·params FLOPs per sequence per step on a full
read of weights + KV cache (intensity grows with batch B). A phase is compute-bound when its
intensity is above the machine's ridge point (peak FLOP/s ÷ bandwidth), memory-bound below it.
References: Williams, Waterman & Patterson, "Roofline" (2009); Kaplan et al. (2020) for 2·N FLOPs/token;
Pope et al., "Efficiently Scaling Transformer Inference" (2022).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import ModelConfig, dtype_bytes
from engine.perfmodel.flops import decode_step_bytes, decode_step_flops, prefill_bytes, prefill_flops

DEFAULT_MFU = 0.5  # fraction of peak FLOP/s a good prefill reaches (estimate)
DEFAULT_BW_EFF = 0.7  # fraction of peak bandwidth a good decode step reaches (estimate)


@dataclass(frozen=True)
class Hardware:
    name: str
    flops_per_s: float  # dense bf16/fp16 matmul peak (spec sheet), FLOP/s
    bytes_per_s: float  # memory bandwidth (spec sheet), bytes/s
    memory_bytes: float  # device memory
    source: str  # where the numbers come from

    @property
    def ridge(self) -> float:
        """FLOP per byte at which a kernel stops being memory-bound: the roofline's corner."""
        return self.flops_per_s / self.bytes_per_s


GB = 1e9
TFLOP = 1e12
SPEC = "spec sheet, dense bf16/fp16 tensor TFLOP/s (no sparsity) and memory bandwidth"
HARDWARE_PRESETS: dict[str, Hardware] = {h.name: h for h in [
    Hardware("NVIDIA A100 80GB SXM", 312 * TFLOP, 2039 * GB, 80 * GB, SPEC),
    Hardware("NVIDIA H100 SXM", 989 * TFLOP, 3350 * GB, 80 * GB, SPEC),
    Hardware("NVIDIA H200 SXM", 989 * TFLOP, 4800 * GB, 141 * GB, SPEC),
    Hardware("NVIDIA L4", 121 * TFLOP, 300 * GB, 24 * GB, SPEC),
    Hardware("NVIDIA RTX 4090", 165 * TFLOP, 1008 * GB, 24 * GB, SPEC + " (fp16 with fp32 accumulate)"),
    Hardware("Apple M3 Max (40-core GPU)", 14.2 * TFLOP, 400 * GB, 128 * GB,
             "spec sheet: ~14.2 TFLOP/s GPU (fp32 = fp16 rate) and 400 GB/s unified memory"),
    Hardware("Laptop CPU (8 cores, DDR5-5600)", 0.9 * TFLOP, 89.6 * GB, 32 * GB,
             "typical: 8 cores x 3.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA); dual-channel DDR5-5600 = 89.6 GB/s"),
]}


def _llama(n_layers, d_model, n_heads, n_kv_heads, d_ff, vocab, ctx, tied=False) -> ModelConfig:
    return ModelConfig(arch="llama", vocab_size=vocab, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       n_kv_heads=n_kv_heads, head_dim=d_model // n_heads, d_ff=d_ff, max_seq_len=ctx,
                       norm_eps=1e-5, tie_embeddings=tied)


def _gpt2(n_layers, d_model, n_heads) -> ModelConfig:
    return ModelConfig(arch="gpt2", vocab_size=50257, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       n_kv_heads=n_heads, head_dim=d_model // n_heads, d_ff=4 * d_model, max_seq_len=1024,
                       norm_eps=1e-5, tie_embeddings=True, qkv_bias=True)


MODEL_PRESETS: dict[str, ModelConfig] = {
    "SmolLM2-135M": _llama(30, 576, 9, 3, 1536, 49152, 8192, tied=True),
    "GPT-2 124M": _gpt2(12, 768, 12),
    "GPT-2 355M": _gpt2(24, 1024, 16),
    "GPT-2 774M": _gpt2(36, 1280, 20),
    "GPT-2 1.5B": _gpt2(48, 1600, 25),
    "Llama-2 7B (MHA, 32 KV heads)": _llama(32, 4096, 32, 32, 11008, 32000, 4096),
    "Llama-2 70B (GQA, 8 KV heads)": _llama(80, 8192, 64, 8, 28672, 32000, 4096),
}


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_tokens: int
    output_tokens: int
    example: str


WORKLOAD_PRESETS: dict[str, Workload] = {w.name: w for w in [
    Workload("Translation / summarisation", 2000, 200, "long input, short output"),
    Workload("Chat", 300, 300, "balanced turn"),
    Workload("Code generation / writing", 200, 1500, "short input, long output"),
]}


def prefill_intensity(cfg: ModelConfig, T: int, B: int = 1, bytes_per_weight: float = 4, kv_dtype_bytes: int = 4) -> float:
    return prefill_flops(cfg, T, B).total / prefill_bytes(cfg, T, B, bytes_per_weight, kv_dtype_bytes)


def decode_intensity(cfg: ModelConfig, S: int, B: int = 1, bytes_per_weight: float = 4, kv_dtype_bytes: int = 4) -> float:
    """FLOP per byte of a decode step whose token attends over S cached tokens."""
    return decode_step_flops(cfg, S, B) / decode_step_bytes(cfg, S, B, bytes_per_weight, kv_dtype_bytes)


def predicted_crossover_batch(cfg: ModelConfig, S: int, ridge: float, bytes_per_weight: float = 4,
                              kv_dtype_bytes: int = 4, max_batch: int = 65536) -> int | None:
    """Smallest batch whose decode intensity reaches the ridge point (None if the KV cache keeps it below)."""
    b = 1
    while b <= max_batch:
        if decode_intensity(cfg, S, b, bytes_per_weight, kv_dtype_bytes) >= ridge:
            lo = b // 2 + 1 if b > 1 else 1
            return next(x for x in range(lo, b + 1) if decode_intensity(cfg, S, x, bytes_per_weight, kv_dtype_bytes) >= ridge)
        b *= 2
    return None


@dataclass(frozen=True)
class Prediction:
    """Roofline estimates for one workload: each phase's time is the larger of its compute and memory times."""
    ttft_s: float
    tpot_s: float
    total_s: float
    prefill_share: float
    prefill_bound: str  # "compute" or "memory"
    decode_bound: str
    fits_in_memory: bool
    memory_needed: float  # weights + KV cache at the end, bytes


def predict(cfg: ModelConfig, hw: Hardware, prompt_tokens: int, output_tokens: int, batch: int = 1,
            bytes_per_weight: float = 2, kv_dtype_bytes: int = 2, mfu: float = DEFAULT_MFU,
            bw_eff: float = DEFAULT_BW_EFF) -> Prediction:
    """TTFT ≈ max(prefill FLOPs / (peak·MFU), prefill bytes / (bw·eff));
    TPOT ≈ max(decode bytes / (bw·eff), decode FLOPs / (peak·MFU)) at the mean context T + N/2."""
    flops_rate, byte_rate = hw.flops_per_s * mfu, hw.bytes_per_s * bw_eff
    T, N, B = prompt_tokens, output_tokens, batch
    p_compute = prefill_flops(cfg, T, B).total / flops_rate
    p_memory = prefill_bytes(cfg, T, B, bytes_per_weight, kv_dtype_bytes) / byte_rate
    S = T + max(N, 1) // 2
    d_compute = decode_step_flops(cfg, S, B) / flops_rate
    d_memory = decode_step_bytes(cfg, S, B, bytes_per_weight, kv_dtype_bytes) / byte_rate
    ttft, tpot = max(p_compute, p_memory), max(d_compute, d_memory)
    total = ttft + max(N - 1, 0) * tpot
    need = cfg.weight_bytes(bytes_per_weight) + B * (T + N) * cfg.kv_bytes_per_token(kv_dtype_bytes)
    return Prediction(ttft_s=ttft, tpot_s=tpot, total_s=total, prefill_share=ttft / total if total > 0 else float("nan"),
                      prefill_bound="compute" if p_compute >= p_memory else "memory",
                      decode_bound="compute" if d_compute >= d_memory else "memory",
                      fits_in_memory=need <= hw.memory_bytes, memory_needed=need)


def what_to_pay_for(prefill_share: float) -> str:
    """The hardware property that shortens the dominant phase."""
    if prefill_share >= 0.5:
        return "compute (FLOP/s): the valley dominates"
    return "memory bandwidth (bytes/s): the bridge dominates"


@dataclass(frozen=True)
class MeasuredPoint:
    """Where a measured phase sits on the roofline: its intensity (formula) and its achieved rate (measured time)."""
    phase: str
    intensity: float  # FLOP per byte moved (formula for this model and shape)
    flops_per_s: float  # achieved: formula FLOPs / measured seconds
    bytes_per_s: float  # achieved: formula bytes / measured seconds
    seconds: float


def trace_points(trace) -> list[MeasuredPoint]:
    """Prefill and decode points of a Trace: the prefill pass, and the median decode step at its mean context."""
    cfg = trace.model_config
    nbytes = dtype_bytes(trace.dtype)
    B, T = trace.batch_size, trace.n_prompt
    points = []
    if trace.prefill_seconds > 0:
        f, b = prefill_flops(cfg, T, B).total, prefill_bytes(cfg, T, B, nbytes, nbytes)
        points.append(MeasuredPoint("prefill", f / b, f / trace.prefill_seconds, b / trace.prefill_seconds,
                                    trace.prefill_seconds))
    if trace.steps:
        secs = sorted(s.seconds for s in trace.steps)
        median = secs[len(secs) // 2]
        S = sorted(s.kv_length for s in trace.steps)[len(trace.steps) // 2]
        f, b = decode_step_flops(cfg, S, B), decode_step_bytes(cfg, S, B, nbytes, nbytes)
        points.append(MeasuredPoint("decode", f / b, f / median, b / median, median))
    return points
