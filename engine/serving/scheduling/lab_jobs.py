"""The lab jobs a server runs, by name: each job's target, its arguments' types and how it reports progress.

Torch-free on purpose (only the standard library and engine.errors): the dashboard's pages name a job
here, the worker looks the name up, checks the arguments against the declaration and imports the
target. A Job never carries a dotted path, so nothing outside this table can run, and a renamed or
misspelt target fails the suite (tests/engine/serving/scheduling/test_lab_jobs.py imports every target and checks its
signature), not a page at run time.

A job declared `sliced` yields between its points (engine/serving/scheduling/slices.py): only where the callback
is called between two separately timed points (the sweeps), never inside a timed run (remedies report per token).

Progress protocols, declared per job, never guessed from the arguments:
  "progress"  target(..., progress=report): report(message: str, fraction: float) -> False cancels
  "on_point"  target(..., on_point=report): report(partial_result) -> False cancels
"""
from __future__ import annotations

import importlib
import types
from dataclasses import dataclass

from engine.errors import EngineError

PROTOCOLS = ("progress", "on_point")  # the keyword a target reports through (see the module docstring)
JOB_MODULES = ("engine.labs.", "engine.core.capture", "engine.serving.scheduling.model_pool")  # where targets live


@dataclass(frozen=True)
class Arg:
    """One argument of a lab job: the target's parameter name, the type its value must have, and whether it may be left out."""
    name: str
    type: object  # int, str, list[int], tuple[str, ...], dict[str, str], int | None, or "module:Class" (resolved in the worker)
    optional: bool = False  # the target has a default for it


@dataclass(frozen=True)
class LabJob:
    """A lab measurement the worker may run: `target(lm, **arguments, <progress>=report)`."""
    name: str
    target: str  # "module:function"
    args: tuple[Arg, ...] = ()
    progress: str | None = None  # one of PROTOCOLS, or None: the target does not report
    label: str = "lab measurement"
    sliced: bool = False  # its callback comes between two points, untimed: the scheduler serves waiting runs there

    def bind(self, args: tuple = (), kwargs: dict | None = None) -> dict[str, object]:
        """The arguments by name, checked against the declaration; EngineError says what is wrong."""
        kwargs = dict(kwargs or {})
        names = [a.name for a in self.args]
        if len(args) > len(self.args):
            raise EngineError(f"lab job '{self.name}' takes at most {len(self.args)} argument(s) "
                              f"({', '.join(names) or 'none'}), got {len(args)}")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise EngineError(f"lab job '{self.name}' has no argument '{key}' (its arguments: {', '.join(names) or 'none'})")
            if key in bound:
                raise EngineError(f"lab job '{self.name}' got '{key}' twice (by position and by name)")
            bound[key] = value
        for arg in self.args:
            if arg.name not in bound:
                if not arg.optional:
                    raise EngineError(f"lab job '{self.name}' needs '{arg.name}' ({type_name(arg.type)})")
                continue
            if not matches(bound[arg.name], arg.type):
                value = repr(bound[arg.name])
                raise EngineError(f"lab job '{self.name}': '{arg.name}' must be {type_name(arg.type)}, not "
                                  f"{type(bound[arg.name]).__name__} ({value if len(value) <= 40 else value[:37] + '...'})")
        return bound

    def function(self):
        """The target, imported (in the worker: it imports torch)."""
        if not self.target.partition(":")[0].startswith(JOB_MODULES):
            raise EngineError(f"lab job '{self.name}' points outside the lab modules ({self.target})")
        return _resolve(self.target)


def _resolve(path: str):
    """The attribute a "module:name" path names, its module imported."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def type_name(tp) -> str:
    if isinstance(tp, str):
        return tp.rpartition(":")[2]
    if isinstance(tp, type) and not isinstance(tp, types.GenericAlias):
        return tp.__name__
    return str(tp).replace("NoneType", "None")


def matches(value, tp) -> bool:
    """Whether `value` has the declared type (element types of lists, tuples and dicts included; a bool is no int)."""
    if isinstance(tp, str):
        return isinstance(value, _resolve(tp))
    if isinstance(tp, types.UnionType):
        return any(matches(value, t) for t in tp.__args__)
    if isinstance(tp, types.GenericAlias):
        origin, params = tp.__origin__, tp.__args__
        if not isinstance(value, origin):
            return False
        if origin is dict:
            return all(matches(k, params[0]) and matches(v, params[1]) for k, v in value.items())
        if origin is tuple and not (len(params) == 2 and params[1] is Ellipsis):
            return len(value) == len(params) and all(matches(v, t) for v, t in zip(value, params))
        return all(matches(v, params[0]) for v in value)
    if tp is type(None) or tp is None:
        return value is None
    if tp in (int, float) and isinstance(value, bool):
        return False
    if tp is float:
        return isinstance(value, (int, float))
    return isinstance(value, tp)


# --- the registry ----------------------------------------------------------------------------------------------
_PROMPT, _N_TOKENS, _CHAT, _REPEATS = Arg("prompt", str), Arg("n_tokens", int, True), Arg("chat", bool, True), Arg("repeats", int, True)

MODEL_DESCRIBE = LabJob("model.describe", "engine.serving.scheduling.model_pool:describe",
                        (Arg("spec", "engine.serving.scheduling.work:ModelSpec"),), label="loading the model")
ATTENTION_CAPTURE = LabJob("attention.capture", "engine.core.capture:capture_attention",
                           (Arg("prompt_ids", list[int]), Arg("output_ids", list[int]), Arg("layers", list[int] | None, True)),
                           label="capturing attention")
HARDWARE_PEAKS = LabJob("hardware.peaks", "engine.labs.hardware:peaks_of", label="measuring this machine's peaks")
REFERENCE_RUN = LabJob("sweeps.reference_run", "engine.labs.sweeps:reference_run",
                       (Arg("prompt_tokens", int, True), Arg("output_tokens", int, True), _REPEATS),
                       label="a small reference run")
PROMPT_SWEEP = LabJob("sweeps.prompt_lengths", "engine.labs.sweeps:sweep_prompt_lengths",
                      (Arg("prompt_lengths", list[int]), Arg("output_tokens", int, True), _REPEATS), "on_point",
                      "prompt-length sweep", sliced=True)
OUTPUT_SWEEP = LabJob("sweeps.output_lengths", "engine.labs.sweeps:sweep_output_lengths",
                      (Arg("output_lengths", list[int]), Arg("prompt_tokens", int, True), _REPEATS), "on_point",
                      "output-length sweep", sliced=True)
BATCH_SWEEP = LabJob("sweeps.batch_sizes", "engine.labs.sweeps:sweep_batch_sizes",
                     (Arg("batch_sizes", list[int]), Arg("prompt_tokens", int, True), Arg("output_tokens", int, True),
                      _REPEATS, Arg("fused_point", bool, True)), "on_point", "batch-size sweep", sliced=True)
CONTEXT_SWEEP = LabJob("sweeps.contexts", "engine.labs.context_sweep:sweep_contexts",
                       (Arg("contexts", list[int] | None, True), Arg("steps", int, True), _REPEATS), "progress",
                       "decode steps against the context")
PROFILE = LabJob("profiling.phases", "engine.labs.profiling:profile_phases",
                 (Arg("n_prompt", int, True), Arg("decode_steps", int, True), _REPEATS), "progress", "profiling")
CROSSED = LabJob("remedies.crossed", "engine.labs.crossed_remedies:measure_crossed",
                 (Arg("rounds", int, True), Arg("remedies", tuple[str, ...], True)), "progress",
                 "valley and bridge remedies on both kinds of request")
KV_CACHE = LabJob("remedies.kv_cache", "engine.labs.remedies:measure_kv_cache", (_PROMPT, _N_TOKENS, _CHAT), "progress")
SPECULATIVE = LabJob("remedies.speculative", "engine.labs.remedies:measure_speculative",
                     (Arg("prompts", dict[str, str]), _N_TOKENS, Arg("k", int, True), _CHAT, _REPEATS), "progress")
PREFIX_CACHE = LabJob("remedies.prefix_cache", "engine.labs.remedies:measure_prefix_cache",
                      (Arg("user1", str), Arg("user2", str), Arg("answer_tokens", int, True), Arg("decode_tokens", int, True),
                       _REPEATS), "progress")
DTYPES = LabJob("remedies.dtypes", "engine.labs.remedies:measure_dtypes",
                (Arg("dtypes", tuple[str, ...]), _PROMPT, _N_TOKENS, _CHAT, _REPEATS), "progress")
INT8 = LabJob("remedies.int8", "engine.labs.remedies:measure_int8", (_PROMPT, _N_TOKENS, _CHAT, _REPEATS), "progress")
KERNELS = LabJob("remedies.kernels", "engine.labs.remedies:measure_kernels", (_PROMPT, _N_TOKENS, _CHAT, _REPEATS), "progress")
OVERHEAD = LabJob("remedies.overhead", "engine.labs.step_overhead:measure_overhead",
                  (Arg("context", int, True), Arg("steps", int, True)), "progress")
CUDA_GRAPHS = LabJob("remedies.cuda_graphs", "engine.labs.step_overhead:measure_cuda_graphs", (_PROMPT, _N_TOKENS, _CHAT), "progress")
TRAFFIC = LabJob("traffic.run", "engine.labs.traffic:run_traffic",
                  (Arg("workload", "engine.perfmodel.workload:Workload"), Arg("policies", list[str]), Arg("seed", int, True),
                   Arg("max_batch", int, True), Arg("max_num_batched_tokens", int, True)), "progress", "traffic run")

REGISTRY: dict[str, LabJob] = {job.name: job for job in (
    MODEL_DESCRIBE, ATTENTION_CAPTURE, HARDWARE_PEAKS, REFERENCE_RUN, PROMPT_SWEEP, OUTPUT_SWEEP, BATCH_SWEEP,
    CONTEXT_SWEEP, PROFILE, KV_CACHE, SPECULATIVE, PREFIX_CACHE, DTYPES, INT8, KERNELS, OVERHEAD, CUDA_GRAPHS, CROSSED,
    TRAFFIC)}


def lookup(name: str) -> LabJob:
    """The registered job called `name`; EngineError (with the known names) for anything else."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise EngineError(f"'{name}' is not a lab measurement this server runs (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]
