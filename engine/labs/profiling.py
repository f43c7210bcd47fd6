"""Where the time goes: torch.profiler on one prefill and on decode steps, ops grouped into categories.

Two groupings per phase. By KIND of work: matrix-matrix products (GEMM, more than one row of
activations: the valley's wide road), matrix-vector products (GEMV, one row per sequence: the
bridge), the fused attention kernel, other ops (norms, RoPE, element-wise, copies), and wall time
spent outside any operator (Python and dispatch). By PART of the model: attention, MLP, LM head,
other, found by forward hooks that open a `record_function` label around those modules (the model
itself is not edited). References: PyTorch profiler recipe; Williams et al. 2009 (roofline).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from engine.core.clock import now
from engine.core.generate import decode_loop, decode_step, new_cache, prefill
from engine.labs.decode_paths import BLOCKS, decode_path
from engine.labs.timed_request import Timing, timed_request

MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mv", "aten::addmv", "aten::dot",
              "aten::_weight_int8pack_mm", "mkldnn::_linear_pointwise", "mkl::_mkl_linear"}  # the last two: fast kernels
KIND_GEMM, KIND_GEMV = "GEMM (matrix × matrix)", "GEMV (matrix × vector)"
KIND_ATTN, KIND_OTHER, KIND_OUTSIDE = "attention kernel", "other ops", "outside ops (Python, dispatch)"
KINDS = (KIND_GEMM, KIND_GEMV, KIND_ATTN, KIND_OTHER, KIND_OUTSIDE)
PARTS = ("attention", "MLP", "LM head", "other")
LABEL = "two_bends::"


@dataclass
class OpRow:
    name: str
    kind: str
    part: str
    calls: float  # per pass
    self_ms: float  # per pass
    share: float  # of this phase's wall time


@dataclass
class PhaseProfile:
    phase: str  # "prefill" or "decode"
    rows_in: int  # activation rows M of each matmul: batch x new tokens
    passes: int  # forward passes profiled (times below are per pass)
    wall_ms: float
    ops: list[OpRow] = field(default_factory=list)  # sorted by self time, largest first
    by_kind: dict[str, float] = field(default_factory=dict)  # ms per pass
    by_part: dict[str, float] = field(default_factory=dict)


@dataclass
class ProfileResult:
    model: str
    device: str
    dtype: str
    n_prompt: int
    prefill: PhaseProfile
    decode: PhaseProfile
    note: str = ""
    profiled_path: str = BLOCKS  # the hooks that label attention and MLP make every pass run through the modules
    run_path: str = ""  # the decode path a Run takes here (engine/labs/decode_paths.py)
    run_timings: list[Timing] = field(default_factory=list)  # the same prefill and steps on a Run's path, unprofiled


def matmul_rows(name: str, shapes: list) -> int | None:
    """Rows M of the activation operand of a matmul op, from the profiler's recorded input shapes."""
    try:
        if name in ("aten::addmm", "aten::addmv", "aten::baddbmm"):
            return int(shapes[1][-2]) if len(shapes[1]) >= 2 else 1
        if name in ("aten::mv", "aten::dot"):
            return 1
        return int(shapes[0][-2]) if len(shapes[0]) >= 2 else 1
    except (IndexError, TypeError, ValueError):
        return None


def classify_kind(name: str, shapes: list) -> str:
    if name in MATMUL_OPS:
        rows = matmul_rows(name, shapes)
        return KIND_GEMV if rows == 1 else KIND_GEMM
    if "scaled_dot_product" in name or "flash_attention" in name:
        return KIND_ATTN
    return KIND_OTHER


class _PartHooks:
    """Forward hooks that wrap each block's attention and MLP, and the LM head, in record_function labels while
    installed."""

    def __init__(self, model):
        self.handles, self.open = [], []
        parts = [pair for block in model.blocks for pair in ((block.attn, "attention"), (block.mlp, "MLP"))]
        for module, part in parts + [(model.lm_head, "LM head")]:
            self.handles.append(module.register_forward_pre_hook(self._enter(part)))
            self.handles.append(module.register_forward_hook(self._exit))

    def _enter(self, part: str):
        def hook(module, args):
            ctx = record_function(LABEL + part)
            ctx.__enter__()
            self.open.append(ctx)
        return hook

    def _exit(self, module, args, output):
        self.open.pop().__exit__(None, None, None)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _part_of(event) -> str:
    node = event
    while node is not None:
        if node.name.startswith(LABEL):
            return node.name[len(LABEL):]
        node = node.cpu_parent
    return "other"


def summarize_events(events, phase: str, rows_in: int, passes: int, wall_s: float) -> PhaseProfile:
    """Group a profiler's events into per-op rows, kinds and parts (times per forward pass)."""
    wall_ms = wall_s * 1e3 / passes
    grouped: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for ev in events:
        if ev.name.startswith(LABEL) or ev.name.startswith("ProfilerStep") or ev.device_type != torch.autograd.DeviceType.CPU:
            continue
        key = (ev.name, classify_kind(ev.name, ev.input_shapes), _part_of(ev))
        grouped[key][0] += 1
        grouped[key][1] += ev.self_cpu_time_total / 1e3  # microseconds -> ms
    prof = PhaseProfile(phase, rows_in, passes, wall_ms)
    by_kind, by_part = dict.fromkeys(KINDS, 0.0), dict.fromkeys(PARTS, 0.0)
    for (name, kind, part), (calls, ms) in grouped.items():
        ms /= passes
        prof.ops.append(OpRow(name, kind, part, calls / passes, ms, ms / wall_ms if wall_ms > 0 else 0.0))
        by_kind[kind] += ms
        by_part[part] += ms
    inside = sum(by_kind.values())
    by_kind[KIND_OUTSIDE] = max(0.0, wall_ms - inside)
    by_part["other"] += by_kind[KIND_OUTSIDE]
    prof.ops.sort(key=lambda r: r.self_ms, reverse=True)
    prof.by_kind, prof.by_part = by_kind, by_part
    return prof


def _activities(device: torch.device) -> list:
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


@torch.inference_mode()
def profile_phases(lm, n_prompt: int = 256, decode_steps: int = 4, progress=None, repeats: int = 3) -> ProfileResult:
    """Profile one prefill of `n_prompt` tokens and `decode_steps` decode steps right after it; then time the same
    request `repeats` times on a Run's path, without the profiler or its hooks, for the page to compare."""
    n_prompt = max(2, min(int(n_prompt), lm.config.max_seq_len - decode_steps - 1))
    device = lm.device
    ids = (torch.arange(n_prompt, device=device) * 7919 + 13) % lm.config.vocab_size  # fixed, varied tokens
    ids = ids.reshape(1, n_prompt)  # (1, T)
    report = progress or (lambda message, fraction: None)
    report("warming up (first calls are slower and are not profiled)", 0.1)
    warm = new_cache(lm, 1, n_prompt + decode_steps + 1)
    prefill(lm, ids, warm)
    decode_step(lm, ids[:, -1], warm)

    hooks = _PartHooks(lm.model)
    try:
        cache = new_cache(lm, 1, n_prompt + decode_steps + 1)
        report(f"profiling one prefill of {n_prompt} tokens", 0.4)
        with profile(activities=_activities(device), record_shapes=True) as prof_p:
            start = now(device)
            logits = prefill(lm, ids, cache)  # (1, V)
            wall_p = now(device) - start
        report(f"profiling {decode_steps} decode steps", 0.8)
        token = logits.argmax(-1)  # (1,)
        with profile(activities=_activities(device), record_shapes=True) as prof_d:
            wall_d = sum(decode_loop(lm, token, cache, decode_steps))
    finally:
        hooks.remove()
    run_timings = []
    for r in range(max(0, repeats)):
        report(f"timing the same request on a Run's path, without the profiler ({r + 1} of {repeats})", 0.85)
        run_timings.append(timed_request(lm, ids[0].tolist(), decode_steps + 1))
    report("grouping operators", 0.95)
    pre = summarize_events(prof_p.events(), "prefill", n_prompt, 1, wall_p)
    dec = summarize_events(prof_d.events(), "decode", 1, decode_steps, wall_d)
    note = "CPU self time per operator; wall time measured with the profiler on (it adds some overhead)."
    if device.type == "cuda":
        note += " On CUDA these are host-side times (kernel launches); GPU kernel times are in the profiler's CUDA rows."
    return ProfileResult(lm.name, str(device), lm.dtype_name, n_prompt, pre, dec, note, BLOCKS, decode_path(lm, 1),
                         run_timings)
