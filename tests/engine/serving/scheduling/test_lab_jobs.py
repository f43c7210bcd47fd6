"""The lab-job registry (engine/serving/scheduling/lab_jobs.py): every target exists and takes its declared arguments and progress
keyword, arguments are type-checked, unknown names are refused, and the scheduler calls the declared protocol."""
import ast
import inspect
import pickle
import sys
from pathlib import Path

import pytest

from engine.errors import EngineError
from engine.labs.sweeps import SweepResult
from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Done, Failed, Job, ModelSpec, Progress, drain, result_of

TINY = ModelSpec("tiny-llama", "cpu")
LABS = list(jobs.REGISTRY.values())


@pytest.mark.parametrize("lab", LABS, ids=[lab.name for lab in LABS])
def test_every_registered_target_accepts_its_declared_arguments(lab):
    """A renamed or misspelt target, argument or progress keyword fails here, not on a page at run time."""
    assert lab.target.partition(":")[0].startswith(jobs.JOB_MODULES)
    sig = inspect.signature(lab.function())
    params = list(sig.parameters.values())
    assert params[0].name == "lm", "a lab job's target takes the loaded model first"
    progress = {lab.progress: print} if lab.progress else {}
    sig.bind(object(), **{a.name: object() for a in lab.args}, **progress)  # TypeError if a name is wrong
    declared = {a.name: a for a in lab.args}
    for p in params[1:]:
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.name in declared and not declared[p.name].optional, f"{lab.name}: '{p.name}' is required"
        if p.name in jobs.PROTOCOLS:
            assert lab.progress == p.name, f"{lab.name}: the target reports through '{p.name}'; declare it"
    for arg in lab.args:
        param = sig.parameters[arg.name]
        assert arg.optional == (param.default is not param.empty), f"{lab.name}: '{arg.name}' optional?"
        if param.annotation is not param.empty:  # annotations are strings (from __future__ import annotations)
            assert str(param.annotation) == jobs.type_name(arg.type), f"{lab.name}: '{arg.name}' type"
        if isinstance(arg.type, str):
            assert isinstance(jobs._resolve(arg.type), type)
    assert lab.progress in (None, *jobs.PROTOCOLS)


def test_the_registry_module_imports_no_torch():
    """Pages and ui name jobs from it: it may import only the standard library and engine.errors."""
    tree = ast.parse(Path(jobs.__file__).read_text())
    imported = {n.name for node in ast.walk(tree) if isinstance(node, ast.Import) for n in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "engine.errors"}, imported


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(EngineError, match=r"'engine.labs.sweeps:sweep_prompt_lengths' is not a lab measurement .*"
                                          r"known: .*sweeps.prompt_lengths"):
        jobs.lookup("engine.labs.sweeps:sweep_prompt_lengths")


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, r"needs 'prompt_lengths' \(list\[int\]\)"),
    (([8, "16"],), {}, r"'prompt_lengths' must be list\[int\], not list"),
    ((8,), {}, r"'prompt_lengths' must be list\[int\], not int"),
    (([8],), {"output_tokens": True}, r"'output_tokens' must be int, not bool"),
    (([8],), {"output_tokens": 2.0}, r"'output_tokens' must be int, not float"),
    (([8], 4, 5, 6), {}, r"takes at most 3 argument\(s\) \(prompt_lengths, output_tokens, repeats\), got 4"),
    (([8],), {"on_point": print}, r"has no argument 'on_point'"),
    (([8],), {"prompt_lengths": [8]}, r"got 'prompt_lengths' twice"),
])
def test_arguments_are_checked_against_the_declaration(args, kwargs, message):
    with pytest.raises(EngineError, match=message):
        jobs.PROMPT_SWEEP.bind(args, kwargs)


def test_declared_types_cover_the_shapes_the_pages_send():
    assert jobs.PROMPT_SWEEP.bind(([8, 16],), {"output_tokens": 3}) == {"prompt_lengths": [8, 16], "output_tokens": 3}
    assert jobs.DTYPES.bind((("float32", "bfloat16"), "hi", 4))["dtypes"] == ("float32", "bfloat16")
    with pytest.raises(EngineError, match=r"tuple\[str, \.\.\.\]"):
        jobs.DTYPES.bind((("float32", 16), "hi"))
    assert jobs.SPECULATIVE.bind(({"copy": "a", "open": "b"}, 8, 4))["k"] == 4
    with pytest.raises(EngineError, match=r"dict\[str, str\]"):
        jobs.SPECULATIVE.bind(({"copy": 1},))
    assert jobs.ATTENTION_CAPTURE.bind(([1, 2], [3], None))["layers"] is None
    with pytest.raises(EngineError, match=r"list\[int\] \| None"):
        jobs.ATTENTION_CAPTURE.bind(([1, 2], [3], 0))
    assert jobs.MODEL_DESCRIBE.bind((TINY,)) == {"spec": TINY}
    with pytest.raises(EngineError, match=r"'spec' must be ModelSpec, not str"):
        jobs.MODEL_DESCRIBE.bind(("tiny-llama",))


def test_a_job_carries_a_name_and_pickles_with_it():
    job = pickle.loads(pickle.dumps(Job(model=TINY, name=jobs.PROMPT_SWEEP.name, args=([8],), kwargs={"output_tokens": 2})))
    assert (job.name, job.args, job.kwargs) == ("sweeps.prompt_lengths", ([8],), {"output_tokens": 2})


@pytest.fixture(scope="module")
def scheduler():
    s = Scheduler("queue").start()
    yield s
    s.stop()


def test_the_scheduler_refuses_unknown_names_and_mistyped_arguments(scheduler):
    unknown = scheduler.submit(Job(model=TINY, name="engine.labs.sweeps:sweep_prompt_lengths", args=([8],)))
    final = list(drain(unknown, timeout=60))[-1]
    assert isinstance(final, Failed) and "is not a lab measurement this server runs" in final.message
    mistyped = scheduler.submit(Job(model=TINY, name=jobs.PROMPT_SWEEP.name, args=("8, 16",)))
    final = list(drain(mistyped, timeout=60))[-1]
    assert isinstance(final, Failed) and "'prompt_lengths' must be list[int], not str" in final.message


def test_the_scheduler_passes_the_declared_on_point_protocol(scheduler):
    """Each point arrives as a payload (the partial result), never read as a (message, fraction) pair."""
    job = scheduler.submit(Job(model=TINY, name=jobs.PROMPT_SWEEP.name, args=([4, 8],),
                               kwargs={"output_tokens": 2, "repeats": 2}))
    events = list(drain(job, timeout=120))
    points = [e.payload for e in events if isinstance(e, Progress) and e.payload is not None]
    assert len(points) == 4 and all(isinstance(p, SweepResult) for p in points)  # one per run (shared in thread mode)
    assert isinstance(events[-1], Done)
    assert [p.prompt_tokens for p in events[-1].result.points] == [4, 8]
    assert [p.runs for p in events[-1].result.points] == [2, 2]


def test_the_scheduler_passes_the_declared_progress_protocol(scheduler):
    job = scheduler.submit(Job(model=TINY, name=jobs.PROFILE.name, kwargs={"n_prompt": 8, "decode_steps": 2}))
    events = list(drain(job, timeout=120))
    reported = [e for e in events if isinstance(e, Progress) and e.message.startswith("warming up")]
    assert reported and reported[0].payload is None and 0 <= reported[0].fraction <= 1
    assert isinstance(events[-1], Done)


def test_the_jobs_the_dashboard_itself_submits_run(scheduler):
    """worker_link's model description and attention capture, with the argument shapes it sends."""
    info = result_of(scheduler.submit(Job(model=TINY, name=jobs.MODEL_DESCRIBE.name, args=(TINY,))), timeout=60)
    assert info.spec == TINY and info.config.n_layers >= 2
    got = result_of(scheduler.submit(Job(model=TINY, name=jobs.ATTENTION_CAPTURE.name, args=([1, 2, 3], [4, 5], [1]))),
                    timeout=60)
    assert got.layers == [1]
