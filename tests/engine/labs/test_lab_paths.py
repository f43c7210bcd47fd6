"""Labs run a Run's engine path: the same model object, kernels, decode path and thread settings; the batch sweep runs
every size on one decode path and keeps a fused batch-1 step apart, each point naming the path it ran."""
import dataclasses

import pytest

from engine.labs import decode_paths, sweeps
from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling import scheduler as scheduler_module
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Done, Job, ModelSpec, Request, drain


def test_decode_paths_are_named_from_what_the_model_runs(plain_tiny, tiny_gpt2, fused_tiny):
    assert decode_paths.decode_path(fused_tiny, 1) == decode_paths.FUSED_C
    assert decode_paths.decode_path(fused_tiny, 2) == decode_paths.FLAT_LOOP
    assert decode_paths.decode_path(plain_tiny, 1) == decode_paths.FLAT_LOOP
    assert decode_paths.decode_path(tiny_gpt2, 4) == decode_paths.BLOCKS
    assert decode_paths.batched_path(plain_tiny) is plain_tiny
    batched = decode_paths.batched_path(fused_tiny)
    assert decode_paths.decode_path(batched, 1) == decode_paths.FLAT_LOOP and batched.model is fused_tiny.model
    blocks = dataclasses.replace(plain_tiny, backends=dataclasses.replace(plain_tiny.backends, flat_decode=False))
    assert decode_paths.decode_path(blocks, 1) == decode_paths.BLOCKS


def test_a_decode_path_names_what_the_trace_records(tiny_llama, fused_tiny):
    """The path named from the model is the one its run's Trace records (env["backends"]), on whatever this machine
    chose for the tiny model and on the stand-in fused step."""
    import engine

    for lm in (tiny_llama, fused_tiny):
        trace = engine.generate(lm, [1, 2, 3, 4], 3, ignore_eos=True)
        recorded = trace.env["backends"]["decode_step"]
        path = decode_paths.decode_path(lm, 1)
        assert path == decode_paths.FUSED.get(recorded, decode_paths.FLAT_LOOP)


def test_every_batch_size_runs_one_path_and_the_fused_point_stays_apart(fused_tiny):
    result = sweeps.sweep_batch_sizes(fused_tiny, [1, 2, 4], prompt_tokens=8, output_tokens=3, repeats=2,
                                      fused_point=True)
    assert [p.batch_size for p in result.points] == [1, 2, 4]
    assert {p.decode_path for p in result.points} == {decode_paths.FLAT_LOOP}
    (fused,) = result.separate
    assert (fused.batch_size, fused.decode_path) == (1, decode_paths.FUSED_C)
    assert fused_tiny.backends.decode_step.calls == 2 + 2 * 2  # warm-up, then 2 steps in each of 2 rounds: only its own
    assert all(p.runs == 2 and len(p.tpot_runs) == 2 for p in result.points + result.separate)
    assert result.rounds_done == 2 and not result.cancelled
    alone = sweeps.sweep_batch_sizes(fused_tiny, [1, 2], 8, 3)  # by default: one round, no fused point
    assert alone.separate == [] and alone.repeats == 1


def test_sweep_points_are_medians_of_their_rounds(tiny_llama):
    result = sweeps.sweep_prompt_lengths(tiny_llama, [8, 16], output_tokens=4, repeats=3)
    for p in result.points:
        assert p.runs == 3 and p.ttft_s == pytest.approx(sorted(p.ttft_runs)[1])
        assert p.tpot_s == pytest.approx(sorted(p.tpot_runs)[1])
        assert p.prefill_tokens_per_s == pytest.approx(p.prompt_tokens / p.ttft_s)
        assert p.cpu_wait is not None and p.cpu_wait.runs == 3
        assert p.decode_path == decode_paths.decode_path(tiny_llama, 1)


def test_a_labs_batch_1_point_runs_what_a_run_from_home_runs(tiny_llama, monkeypatch):
    """The same request as a Run from Home (queue mode) and as a prompt sweep's point, through one scheduler: the
    same model object, kernels, decode path and thread settings (numbers from the traces, not timings)."""
    seen, runs = [], []
    real, real_run = sweeps.generate_batch, scheduler_module.generate

    def spy(lm, prompts, n, **kwargs):
        trace = real(lm, prompts, n, **kwargs)
        seen.append((lm, trace))
        return trace

    def spy_run(lm, *args, **kwargs):
        runs.append(lm)
        return real_run(lm, *args, **kwargs)

    monkeypatch.setattr(sweeps, "generate_batch", spy)
    monkeypatch.setattr(scheduler_module, "generate", spy_run)
    spec = ModelSpec("tiny-llama", "cpu")
    scheduler = Scheduler("queue").start()
    try:
        job = scheduler.submit(Job(model=spec, name=jobs.PROMPT_SWEEP.name, args=([12],),
                                   kwargs={"output_tokens": 5, "repeats": 1}))
        assert isinstance(list(drain(job, timeout=120))[-1], Done)
        lab_lm, lab_trace = seen[-1]
        ids = list(lab_trace.prompt_ids)
        run = scheduler.submit(Request(model=spec, prompt_ids=ids, max_new_tokens=5))
        final = list(drain(run, timeout=120))[-1]
        assert isinstance(final, Done)
        home = final.result
        assert runs == [lab_lm]  # the model object a Run gets from the pool
    finally:
        scheduler.stop()
    assert lab_trace.env["kernels"] == home.env["kernels"]
    assert lab_trace.env["threads"] == home.env["threads"]
    for key in ("decode_step", "adaptive_threads", "temperature"):
        assert lab_trace.settings[key] == home.settings[key], key
    assert [s.threads for s in lab_trace.steps] == [s.threads for s in home.steps] or not any(s.threads for s in home.steps)
    assert lab_trace.output_ids == home.output_ids  # greedy on both: the same tokens
