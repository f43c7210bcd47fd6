"""Slices: a sweep yields between its points, so a run waiting behind it starts after one point, not after the sweep."""
import queue
import threading

import pytest

import engine
from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import FINAL, Job, ModelSpec, Progress, Request, result_of

TINY = ModelSpec("tiny-llama", "cpu")
OTHER = ModelSpec("tiny-gpt2", "cpu")
POINTS = [32] * 12  # twelve points of the same length: a long job on a tiny model


class Log(queue.Queue):
    """A work item's event queue that also notes, in one shared list, when each item got its final event."""

    def __init__(self, name: str, order: list, lock: threading.Lock):
        super().__init__()
        self.name, self.order, self.lock = name, order, lock

    def put(self, item, *args, **kwargs):
        if isinstance(item, Progress) and item.payload is not None:
            with self.lock:
                self.order.append(f"{self.name}:point")
        if isinstance(item, FINAL):
            with self.lock:
                self.order.append(f"{self.name}:{type(item).__name__}")
        super().put(item, *args, **kwargs)


@pytest.fixture
def logged():
    order, lock = [], threading.Lock()
    return order, (lambda name: Log(name, order, lock))


def sweep(events, lengths=POINTS) -> Job:
    return Job(model=TINY, name=lab_jobs.PROMPT_SWEEP.name, args=(list(lengths), 4), events=events)


def run(n: int, events, model=TINY) -> Request:
    return Request(model=model, prompt_ids=list(range(1, 9)), max_new_tokens=n,
                   params=engine.SamplingParams(ignore_eos=True), events=events)


@pytest.mark.parametrize("mode", ["queue", "batch"])
def test_a_run_waiting_behind_a_sweep_finishes_after_one_point(mode, logged):
    order, log = logged
    s = Scheduler(mode).start()
    try:
        job = s.submit(sweep(log("sweep")))  # first in the queue: a plain FIFO would run the whole sweep first
        reqs = [s.submit(run(6, log(f"run{i}"))) for i in range(3)]
        for req in reqs:
            assert result_of(req, timeout=60).n_output == 6
        result = result_of(job, timeout=60)
    finally:
        s.stop()
    assert len(result.points) == len(POINTS) and not result.cancelled  # the sweep itself lost nothing
    first_point = order.index("sweep:point")
    runs_done = [order.index(f"run{i}:Done") for i in range(3)]
    assert all(i > first_point for i in runs_done)  # the sweep started first: its first point is one slice
    assert order[first_point + 1:first_point + 4] == ["run0:Done", "run1:Done", "run2:Done"] or mode == "batch"
    assert max(runs_done) < order.index("sweep:point", first_point + 1)  # all served before its second point
    assert len(s.slices) == len(POINTS) + 1 and all(x >= 0 for x in s.slices)  # one stretch per point, and the tail


def test_between_two_points_the_batch_runs_in_the_same_loop_with_its_token_budget(logged):
    """The runs served between two points go through the engine-core loop every run takes: in batch mode with a token
    budget their prompts go in by chunks (logged as every step is), and all are done before the sweep's next point."""
    order, log = logged
    s = Scheduler("batch", max_batch=2, max_num_batched_tokens=4).start()
    try:
        job = s.submit(sweep(log("sweep"), lengths=[32] * 4))
        reqs = [s.submit(run(3, log(f"run{i}"))) for i in range(2)]
        for req in reqs:
            assert result_of(req, timeout=60).n_output == 3
        result_of(job, timeout=60)
    finally:
        s.stop()
    ids = {req.id for req in reqs}
    chunks = [c for record in s.step_log for c in record.chunks if c[0] in ids]
    assert {c[0] for c in chunks} == ids and all(0 < tokens <= 4 for _, _, tokens in chunks)  # 8 prompt tokens each
    first_point = order.index("sweep:point")
    assert first_point < min(order.index(f"run{i}:Done") for i in range(2))
    assert max(order.index(f"run{i}:Done") for i in range(2)) < order.index("sweep:point", first_point + 1)


def test_a_run_for_a_model_not_loaded_waits_for_the_sweep_to_end(logged):
    """Loading a model between two points would make that slice as long as the load: it waits for the job."""
    order, log = logged
    s = Scheduler("queue").start()
    try:
        job = s.submit(sweep(log("sweep")))
        req = s.submit(run(4, log("other"), model=OTHER))
        result_of(req, timeout=120)
        result_of(job, timeout=60)
    finally:
        s.stop()
    assert order.index("sweep:Done") < order.index("other:Done")


def test_only_jobs_that_report_between_points_are_sliced():
    """Remedies report per generated token, inside a timed run: serving others there would stretch their numbers."""
    sliced = {job.name for job in lab_jobs.REGISTRY.values() if job.sliced}
    assert sliced == {"sweeps.prompt_lengths", "sweeps.output_lengths", "sweeps.batch_sizes"}
    assert all(lab_jobs.REGISTRY[name].progress == "on_point" for name in sliced)
