"""Disaggregated serving with real worker processes: the tokens of `generate`, a cart at the context's end, cancels
that free everything wherever they land, and a decode worker that dies failing its requests clearly, then coming back."""
import os
import signal

import pytest

import engine
from engine.errors import EngineError
from engine.serving.scheduling.kv_handover import leftovers
from engine.serving.scheduling.work import Failed, FirstToken, ModelSpec, Request, Started, Token, drain, result_of
from engine.serving.scheduling.worker import LocalService, ServiceOptions

GREEDY = engine.SamplingParams(ignore_eos=True)
LLAMA, GPT2 = ModelSpec("tiny-llama", "cpu"), ModelSpec("tiny-gpt2", "cpu")
WAIT = 120


@pytest.fixture(scope="module")
def service():
    svc = LocalService(ServiceOptions(mode="disaggregated", threads=2, max_batch=4))  # worker.py's hook
    yield svc
    svc.close()
    assert leftovers(svc.scheduler.session) == []
    assert svc.scheduler.worker_pids() == {"prefill": None, "decode": None}


def request(n, ids, spec=LLAMA):
    return Request(model=spec, prompt_ids=list(ids), max_new_tokens=n, params=GREEDY)


def alone(lm, n, ids):
    return engine.generate(lm, list(ids), n, ignore_eos=True, warmup=False).output_ids


def settled(service):
    """Nothing is held anywhere once every request has ended."""
    sched = service.scheduler
    assert sched.n_running == 0 and sched.n_waiting == 0
    assert leftovers(sched.session) == []


def test_the_mode_and_two_workers_of_their_own(service):
    status = service.status()
    assert status["mode"] == "disaggregated" and status["running"] == 0
    pids = service.scheduler.worker_pids()
    assert len({pids["prefill"], pids["decode"], os.getpid()}) == 3


def test_same_greedy_tokens_as_generate_for_requests_sharing_the_bridge(service, tiny_llama, tiny_gpt2):
    cases = [(request(10, range(1, 8)), tiny_llama), (request(14, range(2, 60)), tiny_llama),
             (request(6, [7, 3, 9]), tiny_llama), (request(9, range(4, 30), GPT2), tiny_gpt2)]
    for req, _ in cases:
        service.submit(req)
    for req, lm in cases:
        trace = result_of(req, WAIT)
        assert trace.output_ids == alone(lm, req.max_new_tokens, req.prompt_ids)
        assert trace.settings["handover"]["bytes"] == trace.kv_bytes_per_token * trace.n_prompt
        assert trace.env["threads"] == 1  # two threads in all: one per worker
    sched = service.scheduler
    assert {entry["worker"] for entry in sched.timeline} == {"prefill", "decode"}
    assert {h["id"] for h in sched.handovers} >= {req.id for req, _ in cases}
    settled(service)


def test_the_handover_survives_a_prompt_at_the_context_limit(service, tiny_llama):
    limit = tiny_llama.config.max_seq_len
    ids = [(7 * i) % 500 + 1 for i in range(limit - 3)]
    req = service.submit(request(3, ids))
    trace = result_of(req, WAIT)
    assert trace.n_prompt + trace.n_output == limit
    assert trace.output_ids == alone(tiny_llama, 3, ids)
    assert trace.settings["handover"]["tokens"] == limit - 3
    with pytest.raises(EngineError, match="exceeds"):  # one more token is refused with the usual line
        result_of(service.submit(request(4, ids)), WAIT)
    settled(service)


@pytest.mark.parametrize("when", [Started, FirstToken, Token], ids=["mid-prefill", "between-workers", "on-the-bridge"])
def test_a_cancel_wherever_it_lands_frees_everything(service, tiny_llama, when):
    req = service.submit(request(200, range(1, 40)))
    for event in drain(req, WAIT):  # 200 tokens: it is still running when the event comes
        if isinstance(event, when):
            service.cancel(req)
            break
    final = list(drain(req, WAIT))[-1]
    assert isinstance(final, Failed) and final.cancelled
    settled(service)
    after = service.submit(request(4, range(1, 6)))
    trace = result_of(after, WAIT)
    assert [step.riders for step in trace.steps] == [1, 1, 1]  # the cancelled one left the bridge
    assert trace.output_ids == alone(tiny_llama, 4, range(1, 6))


def test_a_dying_decode_worker_fails_its_requests_clearly_and_the_next_request_works(service, tiny_llama):
    sched = service.scheduler
    riders = [service.submit(request(200, range(1, 10 + i))) for i in range(2)]
    for event in drain(riders[0], WAIT):
        if isinstance(event, Token):
            break
    dead = sched.worker_pids()["decode"]
    os.kill(dead, signal.SIGKILL)
    for req in riders:
        final = [e for e in drain(req, WAIT)][-1]
        assert isinstance(final, Failed) and not final.cancelled
        assert "decode worker" in final.message and "stopped unexpectedly" in final.message
        assert "killed by signal 9" in final.message
    settled(service)
    trace = result_of(service.submit(request(5, range(1, 12))), WAIT)
    assert trace.output_ids == alone(tiny_llama, 5, range(1, 12))
    assert sched.worker_pids()["decode"] not in (None, dead) and sched.restarts >= 1


def test_the_dashboards_engine_process_runs_the_mode_too(tiny_llama):
    from engine.serving.scheduling.worker import make_service

    svc = make_service(ServiceOptions(mode="disaggregated", threads=2), transport="process")
    try:
        assert svc.status()["mode"] == "disaggregated"
        trace = result_of(svc.submit(request(6, range(3, 20))), WAIT)
        assert trace.output_ids == alone(tiny_llama, 6, range(3, 20))
        assert trace.settings["handover"]["tokens"] == 17
    finally:
        svc.close()
    assert not svc.alive()


def test_a_dying_prefill_worker_fails_its_job_clearly_and_the_next_request_works(service, tiny_llama):
    from engine.serving.scheduling.lab_jobs import PROMPT_SWEEP
    from engine.serving.scheduling.work import Job, Progress

    sched = service.scheduler
    job = service.submit(Job(model=LLAMA, name=PROMPT_SWEEP.name, args=([200] * 60,), kwargs=dict(output_tokens=40)))
    for event in drain(job, WAIT):
        if isinstance(event, Progress) and event.payload is not None:  # a point is done: the sweep is under way
            break
    dead = sched.worker_pids()["prefill"]
    os.kill(dead, signal.SIGKILL)
    final = list(drain(job, WAIT))[-1]
    assert isinstance(final, Failed) and "prefill worker" in final.message and "stopped unexpectedly" in final.message
    settled(service)
    trace = result_of(service.submit(request(5, range(1, 12))), WAIT)
    assert trace.output_ids == alone(tiny_llama, 5, range(1, 12))
    assert sched.worker_pids()["prefill"] not in (None, dead)
