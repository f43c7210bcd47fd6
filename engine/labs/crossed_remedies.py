"""Old Qin's indicator lights as an experiment: a valley remedy and bridge remedies, each applied to a valley-heavy
and to a bridge-heavy request, measured on this machine.

The fable says money poured into the valley does nothing for the bridge. Here it is measured: prefix caching (a
prompt whose first 7/8 an earlier request left in the KV cache: only the rest is prefilled) shortens the valley; a
fused decode step (hand-written C or compiled, one sequence per step: fewer gaps between operators) and int8 weights
(weight-only: a quarter of float32's bytes per weight for each step to read) shorten the bridge. Which of them is real
on this machine is measured too: the page's words follow the verdicts (engine/labs/repeats.py), not the fable.

The baseline is the engine's eager decode loop with full prefills (the path batches take); every configuration runs
both requests once per round, rounds repeated, greedy with exact lengths, timed as a Run (engine/labs/timed_request.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.labs.decode_paths import batched_path, decode_path, has_fused_step
from engine.labs.sweeps import prompt_ids_of_length
from engine.labs.timed_request import Timing, timed_request

REQUESTS = {"valley-heavy": (256, 4), "bridge-heavy": (16, 48)}  # name -> (prompt tokens, output tokens)
REUSED_SHARE = 7 / 8  # of a prompt already in the cache for the prefix-caching remedy
BASELINE = "baseline"
REMEDIES = {  # key -> (label, the segment it is meant for)
    "prefix": ("prefix caching (7/8 of the prompt cached)", "prefill"),
    "fused": ("fused decode step", "decode"),
    "int8": ("int8 weights (weight-only)", "decode"),
}


@dataclass
class CrossedResult:
    model: str
    device: str
    baseline_path: str  # the baseline's decode path (engine/labs/decode_paths.py)
    requests: dict[str, tuple[int, int]]
    remedies: dict[str, tuple[str, str]]  # the remedies measured: key -> (label, meant for)
    skipped: dict[str, str] = field(default_factory=dict)  # remedies not measured here: key -> why
    timings: dict[tuple[str, str], list[Timing]] = field(default_factory=dict)  # (request, config) -> one per round
    rounds: int = 0  # rounds finished
    planned_rounds: int = 0
    cancelled: bool = False
    notes: dict[str, str] = field(default_factory=dict)  # remedy key -> what exactly ran (kernel names, paths)

    def runs(self, request: str, config: str) -> list[Timing]:
        return self.timings.get((request, config), [])


def fitted(requests: dict[str, tuple[int, int]], window: int) -> dict[str, tuple[int, int]]:
    """The requests, each prompt shortened where prompt + output would not fit the model's window."""
    out = {}
    for name, (t, n) in requests.items():
        n = min(n, window // 2)
        out[name] = (max(2, min(t, window - n - 1)), n)
    return out


def _models(lm, remedies: tuple[str, ...], skipped: dict[str, str], notes: dict[str, str]) -> dict[str, object]:
    """config -> the model it runs on (prefix caching runs on the baseline's model)."""
    base = batched_path(lm)
    models = {BASELINE: base}
    if "prefix" in remedies:
        models["prefix"] = base
    if "fused" in remedies:
        if has_fused_step(lm):
            models["fused"] = lm
            notes["fused"] = f"{decode_path(lm, 1)} (the one a Run at batch 1 takes here)"
        else:
            skipped["fused"] = ("this model has no fused decode step here (the engine measured none faster than its "
                                "loop, or none applies to this model, dtype or device)")
    if "int8" in remedies:
        from engine.techniques.quantize import quantize_model

        models["int8"], kernel = quantize_model(base)
        notes["int8"] = f"int8 matmul: {kernel}"
    return models


def measure_crossed(lm, rounds: int = 3, remedies: tuple[str, ...] = ("prefix", "fused", "int8"),
                    progress=None) -> CrossedResult:
    """Every configuration (baseline and each remedy) on both requests, once per round; `progress(message,
    fraction)` after each run (False cancels: the rounds measured so far are kept)."""
    unknown = [r for r in remedies if r not in REMEDIES]
    if unknown:
        raise EngineError(f"unknown remedies {unknown}; use some of {', '.join(REMEDIES)}")
    skipped: dict[str, str] = {}
    notes: dict[str, str] = {}
    if progress is not None and progress("preparing the remedies (int8: quantising a copy of the weights)", 0.0) is False:
        return CrossedResult(lm.name, str(lm.device), "", dict(REQUESTS), {}, cancelled=True)
    requests = fitted(REQUESTS, lm.config.max_seq_len)
    models = _models(lm, tuple(remedies), skipped, notes)
    result = CrossedResult(lm.name, str(lm.device), decode_path(models[BASELINE], 1), requests,
                           {k: REMEDIES[k] for k in remedies if k in models}, skipped, planned_rounds=rounds,
                           notes=notes)
    prompts = {name: prompt_ids_of_length(lm, t) for name, (t, _) in requests.items()}
    configs = list(models)
    total = max(1, rounds) * len(requests) * len(configs)
    done = 0
    for r in range(max(1, rounds)):
        for name, (t, n) in requests.items():
            for config in configs:
                reused = min(int(t * REUSED_SHARE), t - 1) if config == "prefix" else 0
                result.timings.setdefault((name, config), []).append(timed_request(models[config], prompts[name], n,
                                                                                   reused))
                done += 1
                if progress is not None and progress(f"round {r + 1}: {name} request, {config}", done / total) is False:
                    result.cancelled = done < total
                    return result
        result.rounds = r + 1
    return result
