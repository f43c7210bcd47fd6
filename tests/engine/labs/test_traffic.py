"""engine/labs/traffic.py: one arrival sequence replayed per policy (tiny model): outcomes, goodput, steps, errors."""
import math
import threading

import pytest

from engine.errors import EngineError
from engine.labs import traffic
from engine.labs.traffic import NOT_YET, run_traffic
from engine.perfmodel.goodput import SLO, goodput, throughput
from engine.perfmodel.workload import Lengths, Workload, preset
from engine.serving.scheduling.kv_handover import leftovers
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Job, ModelSpec, result_of

BURST = Workload(Lengths(12, 0.3, 4, 48), Lengths(6, 0.3, 2, 16), request_rate=math.inf, num_requests=5, name="burst")


def test_queue_and_batch_serve_the_same_burst_completely(tiny_llama):
    run = run_traffic(tiny_llama, BURST, ["queue", "batch"], seed=3)
    queue, batch = run.policies
    assert [(r.arrived_s, r.prompt_tokens, r.output_tokens) for r in queue.requests] == \
           [(r.arrived_s, r.prompt_tokens, r.output_tokens) for r in batch.requests] == \
           [(a.at_s, a.prompt_tokens, a.output_tokens) for a in run.arrivals]
    for policy in (queue, batch):
        outs = policy.outcomes()
        assert all(o.ttft_s is not None and o.ttft_s >= 0 for o in outs)
        assert [o.output_tokens for o in outs] == [r.output_tokens for r in policy.requests]  # ignore_eos: all came
        assert all(len(r.itl_s) == r.output_tokens - 1 for r in policy.requests)
        assert 0 < goodput(outs, SLO(1e6, 1e6)) == throughput(outs)  # loose SLOs: every request is good
        assert goodput(outs, SLO(1e-9, 1e-9)) == 0.0
    # queue mode: one rider per step; batch mode: riders share decode steps, each prefill alone
    assert all(len(s.requests) == 1 for s in queue.steps)
    assert max(len(s.requests) for s in batch.steps if s.kind == "decode") > 1
    assert sum(s.kind == "prefill" for s in batch.steps) == BURST.num_requests
    decode_tokens = sum(len(s.requests) for s in batch.steps if s.kind == "decode")
    assert decode_tokens == sum(r.output_tokens - 1 for r in batch.requests)


def test_chunked_timeline_shows_a_long_prompt_cut_into_pieces_riding_along(tiny_llama):
    w = Workload(Lengths(40), Lengths(6), request_rate=math.inf, num_requests=3, name="long")
    run = run_traffic(tiny_llama, w, ["chunked"], seed=1, max_batch=4, max_num_batched_tokens=16)
    chunked = run.policies[0]
    assert chunked.available and all(not r.error and len(r.token_s) == 6 for r in chunked.requests)
    for r in chunked.requests:  # 40 prompt tokens in steps of at most 16: at least 3 chunks, covering the prompt
        pieces = [c for s in chunked.steps for c in s.chunks if c[0] == r.index]
        assert len(pieces) >= 3 and sum(n for _, _, n in pieces) == 40
        assert [first for _, first, _ in pieces] == sorted(first for _, first, _ in pieces)
    assert any(s.chunks and s.riders for s in chunked.steps)  # a chunk shared a step with riders
    assert all(len(s.riders) + sum(n for _, _, n in s.chunks) <= 16 for s in chunked.steps)
    assert sum(len(s.riders) for s in chunked.steps) == sum(r.output_tokens - 1 for r in chunked.requests)


def test_disaggregated_serves_every_request_with_two_lanes_and_a_cart_each(tiny_llama):
    run = run_traffic(tiny_llama, BURST, ["disaggregated", "batch"], seed=3)
    disagg, batch = run.policies
    assert disagg.available and disagg.note == ""
    assert [r.output_tokens for r in disagg.requests] == [r.output_tokens for r in batch.requests]
    for r in disagg.requests:
        assert not r.error and r.ttft_s is not None and len(r.token_s) == r.output_tokens
    assert {s.worker for s in disagg.steps} == {"prefill", "decode"}
    assert sorted(i for s in disagg.steps if s.kind == "prefill" for i in s.requests) == list(range(BURST.num_requests))
    assert sum(len(s.riders) for s in disagg.steps if s.kind == "decode") == \
        sum(r.output_tokens - 1 for r in disagg.requests)
    crossed = [r.index for r in disagg.requests if r.output_tokens > 1]
    assert [h.index for h in disagg.handovers] == crossed
    assert all(h.bytes > 0 and h.crossing_s > 0 for h in disagg.handovers)


def test_poisson_arrivals_wait_for_their_moment(tiny_llama):
    w = preset("code", prompt=Lengths(8), output=Lengths(3), request_rate=50.0, num_requests=4)
    run = run_traffic(tiny_llama, w, ["batch"], seed=0)
    assert run.arrivals[-1].at_s > 0
    for r in run.policies[0].requests:
        assert r.started_s >= r.arrived_s - 1e-3  # nothing starts before it arrives


def test_policies_the_engine_lacks_say_so_and_the_rest_run(tiny_llama, monkeypatch):
    monkeypatch.setitem(traffic.POLICIES, "chunked", ("+ chunked prefill", dict(mode="batch", future_knob=1)))
    run = run_traffic(tiny_llama, BURST, ["chunked", "batch"], seed=0)
    by = {p.policy: p for p in run.policies}
    assert by["batch"].available and len(by["batch"].requests) == BURST.num_requests
    assert not by["chunked"].available and by["chunked"].note == f"chunked: {NOT_YET}"


@pytest.mark.parametrize("policies, workload, match", [
    ([], BURST, "at least one policy"),
    (["fifo"], BURST, "unknown policy 'fifo'"),
    (["queue"], Workload(Lengths(8), Lengths(4), request_rate=0.0), "request rate must be from 0.001 to"),
    (["queue"], Workload(Lengths(8), Lengths(4), num_requests=0), "number of requests"),
    (["queue"], Workload(Lengths(250), Lengths(20), num_requests=1), "beyond tiny-llama"),
    (["queue"], Workload(Lengths(8), Lengths(0, low=0), num_requests=1), "at least 1"),
    (["queue"], Workload(Lengths(8), Lengths(4), num_requests=1000), "at most 256 requests"),
])
def test_bad_inputs_get_one_clear_line(tiny_llama, policies, workload, match):
    with pytest.raises(EngineError, match=match) as err:
        run_traffic(tiny_llama, workload, policies)
    assert "\n" not in str(err.value)


def test_cancel_stops_the_run_and_its_scheduler(tiny_llama):
    calls = []

    def progress(message, fraction):
        calls.append(fraction)
        return len(calls) < 3  # cancel after the second served request
    before = threading.active_count()
    run = run_traffic(tiny_llama, BURST, ["queue", "batch"], progress=progress)
    assert run.cancelled and [p.policy for p in run.policies] == ["queue"] and run.policies[0].note == "cancelled"
    assert threading.active_count() == before  # the policy's scheduler thread has ended


def _capture_schedulers(monkeypatch) -> list:
    made, original = [], traffic.make_scheduler

    def make(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(traffic, "make_scheduler", make)
    return made


def _gone(sched) -> bool:
    """Both worker processes ended and no KV cart of this coordinator left in shared memory."""
    sides = [s for s in sched._sides.values() if s is not None]
    return len(sides) == 2 and all(s.proc.poll() is not None for s in sides) and not leftovers(sched.session)


def test_disaggregated_workers_stop_and_carts_are_swept_when_cancelled(tiny_llama, monkeypatch):
    made, calls = _capture_schedulers(monkeypatch), []

    def progress(message, fraction):
        calls.append(fraction)
        return len(calls) < 3
    run = run_traffic(tiny_llama, BURST, ["disaggregated"], progress=progress)
    assert run.cancelled and run.policies[0].note == "cancelled"
    assert _gone(made[0])


def test_disaggregated_workers_stop_when_the_model_does_not_load(tiny_llama, monkeypatch):
    made = _capture_schedulers(monkeypatch)
    monkeypatch.setattr(traffic, "model_spec", lambda lm: ModelSpec("no-such-model", "cpu"))
    run = run_traffic(tiny_llama, BURST, ["disaggregated", "batch"])
    disagg, batch = run.policies
    assert not disagg.available and "unknown model 'no-such-model'" in disagg.note and "\n" not in disagg.note
    assert len(batch.requests) == BURST.num_requests and not run.cancelled
    assert _gone(made[0])


def test_disaggregated_runs_as_a_lab_job_in_the_engine_worker():
    sched = Scheduler().start()
    try:
        job = sched.submit(Job(model=ModelSpec("tiny-llama", "cpu"), name="traffic.run", args=(BURST, ["disaggregated"]),
                               kwargs={"seed": 2, "max_batch": 2}))
        run = result_of(job, timeout=180)
        disagg = run.policies[0]
        assert disagg.available and all(not r.error and r.first_s is not None for r in disagg.requests)
        assert len(disagg.handovers) == sum(r.output_tokens > 1 for r in disagg.requests)
    finally:
        sched.stop()


def test_runs_as_a_registered_lab_job():
    sched = Scheduler().start()
    try:
        job = sched.submit(Job(model=ModelSpec("tiny-llama", "cpu"), name="traffic.run", args=(BURST, ["batch"]),
                               kwargs={"seed": 2, "max_batch": 2}))
        run = result_of(job, timeout=120)
        assert run.max_batch == 2 and max(len(s.requests) for s in run.policies[0].steps) <= 2
        bad = sched.submit(Job(model=ModelSpec("tiny-llama", "cpu"), name="traffic.run", args=("chat", ["batch"])))
        with pytest.raises(EngineError, match="'workload' must be Workload"):
            result_of(bad, timeout=60)
    finally:
        sched.stop()
