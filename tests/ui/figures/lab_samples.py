"""Made-up lab results shaped like real ones (a real SmolLM2 run's numbers), for figure-layout checks without a model."""
from __future__ import annotations

from engine.labs.profiling import KIND_ATTN, KIND_GEMM, KIND_GEMV, KIND_OTHER, KIND_OUTSIDE, PARTS, PhaseProfile, ProfileResult
from engine.labs.sweeps import SweepPoint
from engine.perfmodel.roofline import MeasuredPoint
from ui.figures import fig_profile, fig_roofline, fig_sweeps


def sweep_point(kind: str, batch: int, prompt: int, out: int, ttft_ms: float, tpot_ms: float) -> SweepPoint:
    ttft, tpot = ttft_ms / 1000, tpot_ms / 1000
    return SweepPoint(kind, batch, prompt, out, ttft, tpot * (out - 1), tpot, tpot, ttft + tpot * (out - 1),
                      batch * prompt / ttft, batch / tpot)


def batch_points() -> list[SweepPoint]:
    rows = [(1, 260, 63), (2, 330, 66), (4, 520, 70), (8, 900, 80), (16, 1340, 98)]  # 246 -> 764 prefill tok/s
    return [sweep_point("batch", b, 64, 16, ttft, tpot) for b, ttft, tpot in rows]


def prompt_points() -> list[SweepPoint]:
    rows = [(16, 96, 63), (64, 240, 64), (512, 857, 66), (1024, 2184, 65)]
    return [sweep_point("prompt", 1, t, 16, ttft, tpot) for t, ttft, tpot in rows]


def profile_result() -> ProfileResult:
    prefill = PhaseProfile("prefill", 64, 1, 240.0, by_kind={KIND_GEMM: 170, KIND_GEMV: 0, KIND_ATTN: 30, KIND_OTHER: 30,
                                                               KIND_OUTSIDE: 10},
                           by_part={PARTS[0]: 60, PARTS[1]: 120, PARTS[2]: 40, PARTS[3]: 20})
    decode = PhaseProfile("decode", 1, 8, 63.0, by_kind={KIND_GEMM: 2, KIND_GEMV: 40, KIND_ATTN: 6, KIND_OTHER: 10,
                                                          KIND_OUTSIDE: 5},
                          by_part={PARTS[0]: 15, PARTS[1]: 30, PARTS[2]: 12, PARTS[3]: 6})
    return ProfileResult("SmolLM2-135M-Instruct", "cpu", "float32", 64, prefill, decode)


def sample_figures() -> dict:
    peak_flops, peak_bw = 61e9, 5e9  # ridge 12.2 FLOP/byte, as in the report
    points = [MeasuredPoint("prefill", 95.0, 13.7e9, 0.144e9, 0.24), MeasuredPoint("decode", 1.0, 4.3e9, 4.3e9, 0.063)]
    batch = batch_points()
    prompts = prompt_points()
    result = profile_result()
    return {
        "roofline": fig_roofline.roofline_figure(peak_flops, peak_bw, points),
        "batch_throughput": fig_sweeps.batch_throughput_figure(batch),
        "batch_latency": fig_sweeps.batch_latency_figure(batch, 16, 27),
        "batch_latency_same": fig_sweeps.batch_latency_figure(batch, 8, 8),
        "ttft_sweep": fig_sweeps.ttft_figure(prompts, None),
        "sweep_split": fig_sweeps.phase_split_figure(prompts),
        "profile_kinds": fig_profile.kinds_figure(result),
        "profile_parts": fig_profile.parts_figure(result),
    }
