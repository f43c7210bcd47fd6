"""Running one registered lab job: its name looked up, its arguments checked, the progress it declares passed in.

Both the Scheduler (engine/serving/scheduling/scheduler.py) and the valley of disaggregated serving
(disaggregated_workers.py) run lab jobs through `run_lab_job`, so a job behaves the same behind either: the same
Started, Progress and final events, the same cancellation (its callback answers False, and a job that notices ends
as cancelled). A job declared `sliced` yields at each point to the Slices it is given (engine/serving/scheduling/slices.py:
begin, between_points, end), where the scheduler serves the runs waiting then.
"""
from __future__ import annotations

import time

from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.slices import Slices
from engine.serving.scheduling.work import Done, Failed, Job, Progress, Started


def run_lab_job(job: Job, pool: ModelPool, slices: Slices | None = None) -> float | None:
    """Run `job` on its model to its final event; its seconds when it finished (Done sent), None when cancelled.

    Raises EngineError for a name the registry does not hold or arguments that do not fit, and whatever the job
    raises unless it was cancelled meanwhile: the caller turns that into Failed (work.failure_message).
    """
    lab = jobs.lookup(job.name)
    kwargs = lab.bind(job.args, job.kwargs)  # EngineError for missing, unknown or mistyped arguments
    function = lab.function()
    started = time.perf_counter()
    job.emit(Started(started - job.arrival))
    sliced = lab.sliced and slices is not None

    def go_on() -> bool:
        return slices.between_points(job) if sliced else not job.cancelled.is_set()

    def report_progress(message: str, fraction: float) -> bool:  # "progress": (message, fraction)
        if job.cancelled.is_set():
            return False
        job.emit(Progress(message, float(fraction)))
        return go_on()

    def report_point(partial) -> bool:  # "on_point": a partial result after each point
        if job.cancelled.is_set():
            return False
        job.emit(Progress("", -1.0, partial))
        return go_on()

    lm = pool.get(job.model, progress=lambda message, fraction: job.emit(Progress(message, fraction)))
    if sliced:
        slices.begin()
    if lab.progress is not None:
        kwargs[lab.progress] = {"progress": report_progress, "on_point": report_point}[lab.progress]
    try:
        result = function(lm, **kwargs)
    except Exception:
        if not job.cancelled.is_set():
            raise
    if sliced:
        slices.end()  # the stretch after its last yield point
    if job.cancelled.is_set():  # the function noticed (its callback returned False) or finished anyway
        job.emit(Failed("cancelled", cancelled=True))
        return None
    seconds = time.perf_counter() - started
    job.emit(Done(result))
    return seconds
