"""Per-phase metrics from a Trace, with vLLM's benchmark meanings so numbers compare with servers.

TTFT: request start to first token (prefill + first sampling). ITL: gap between consecutive tokens.
TPOT: (end-to-end - TTFT) / (output tokens - 1). Prefill tokens/s = prompt tokens / prefill time.
Decode tokens/s = batch / TPOT.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from engine.core.trace import Trace


@dataclass(frozen=True)
class PhaseSummary:
    prompt_tokens: int
    output_tokens: int
    batch_size: int
    ttft_s: float
    tpot_s: float  # NaN when only one token was generated
    itl_p50_s: float
    itl_p90_s: float
    itl_p99_s: float
    itl_max_s: float
    total_s: float
    prefill_s: float
    decode_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    prefill_share: float  # fraction of end-to-end time spent in prefill
    kv_bytes: int  # KV cache in use at the end (whole batch)
    queue_s: float = 0.0  # waiting for the engine before the request started (not part of TTFT)

    def as_dict(self) -> dict:
        return asdict(self)


def itl_seconds(trace: Trace) -> np.ndarray:
    return np.array([s.seconds for s in trace.steps], dtype=float)


def summarize(trace: Trace) -> PhaseSummary:
    itl = itl_seconds(trace)
    n_out = trace.n_output
    total = trace.total_seconds
    tpot = (total - trace.prefill_seconds) / (n_out - 1) if n_out > 1 else float("nan")

    def pct(q: float) -> float:
        return float(np.percentile(itl, q)) if itl.size else float("nan")

    kv_bytes = trace.steps[-1].kv_bytes if trace.steps else trace.n_prompt * trace.kv_bytes_per_token * trace.batch_size
    return PhaseSummary(
        prompt_tokens=trace.n_prompt, output_tokens=n_out, batch_size=trace.batch_size,
        ttft_s=trace.prefill_seconds, tpot_s=tpot,
        itl_p50_s=pct(50), itl_p90_s=pct(90), itl_p99_s=pct(99), itl_max_s=float(itl.max()) if itl.size else float("nan"),
        total_s=total, prefill_s=trace.prefill_seconds, decode_s=trace.decode_seconds,
        prefill_tokens_per_s=trace.n_prompt * trace.batch_size / trace.prefill_seconds if trace.prefill_seconds > 0 else float("nan"),
        decode_tokens_per_s=trace.batch_size / tpot if tpot == tpot and tpot > 0 else float("nan"),
        prefill_share=trace.prefill_seconds / total if total > 0 else float("nan"),
        kv_bytes=kv_bytes, queue_s=trace.queue_seconds,
    )


@dataclass(frozen=True)
class BridgeSharing:
    """How a request's decode steps were shared with other requests (continuous batching), from its trace."""
    steps: int
    shared_steps: int  # steps with more than one rider
    mean_riders: float
    max_riders: int
    itl_shared_p50_s: float  # median gap between tokens when shared (NaN if never shared)
    itl_alone_p50_s: float  # median gap when this request crossed alone (NaN if it never did)
    stall_s: float  # time its tokens waited for other requests' prefills (and captures)
    room_tokens_per_s: float  # tokens the whole batch produced per second of this request's decode steps


def bridge_sharing(trace: Trace) -> BridgeSharing | None:
    """None when the trace has no decode steps."""
    if not trace.steps:
        return None
    riders = np.array([s.riders for s in trace.steps])
    gaps = itl_seconds(trace)
    shared, alone = gaps[riders > 1], gaps[riders == 1]
    return BridgeSharing(
        steps=len(gaps), shared_steps=int((riders > 1).sum()), mean_riders=float(riders.mean()),
        max_riders=int(riders.max()),
        itl_shared_p50_s=float(np.median(shared)) if shared.size else float("nan"),
        itl_alone_p50_s=float(np.median(alone)) if alone.size else float("nan"),
        stall_s=float(sum(s.stall_seconds for s in trace.steps)),
        room_tokens_per_s=float(riders.sum() / gaps.sum()) if gaps.sum() > 0 else float("nan"),
    )


def format_summary(s: PhaseSummary) -> str:
    """A small plain-text table for the CLI."""
    ms = 1000.0
    no_steps = "- (one token: it came from prefill, no decode step ran)"  # TPOT and ITL are undefined, not NaN
    decoded = not math.isnan(s.tpot_s)
    rows = [
        ("prompt / output tokens", f"{s.prompt_tokens} / {s.output_tokens}" + (f"  (batch {s.batch_size})" if s.batch_size > 1 else "")),
        ("TTFT (prefill)", f"{s.ttft_s * ms:.1f} ms" + (f"  (+ {s.queue_s * ms:.0f} ms queued)" if s.queue_s else "")),
        ("TPOT", f"{s.tpot_s * ms:.1f} ms" if decoded else no_steps),
        ("ITL p50 / p90 / p99 / max",
         " / ".join(f"{v * ms:.1f}" for v in (s.itl_p50_s, s.itl_p90_s, s.itl_p99_s, s.itl_max_s)) + " ms" if decoded else "-"),
        ("prefill tokens/s", f"{s.prefill_tokens_per_s:,.0f}"),
        ("decode tokens/s", f"{s.decode_tokens_per_s:,.1f}" if decoded else "-"),
        ("end-to-end", f"{s.total_s * ms:.0f} ms ({s.prefill_share:.0%} prefill, {1 - s.prefill_share:.0%} decode)"),
        ("KV cache in use", f"{s.kv_bytes:,} B ({s.kv_bytes / 2**20:.2f} MiB)"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
