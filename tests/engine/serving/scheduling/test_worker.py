"""The engine worker (engine/serving/scheduling/worker.py): a crash fails what was in flight and the next request gets a
fresh worker, a status call during a crash raises (and /metrics still answers), a fatal start leaves no zombie, and the
preload runs on the scheduler's thread, the only one its ModelPool serves."""
import http.client
import os
import signal
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

import engine
from engine.errors import EngineError
from engine.serving.api_server.openai_server import create_app, prepare
from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.work import Failed, Job, ModelSpec, Progress, Request, Started, drain, result_of
from engine.serving.scheduling.worker import LocalService, ProcessService, ServiceOptions
from tests.serving_helpers import BackgroundServer, metrics_of

TINY = ModelSpec("tiny-llama", "cpu")
GREEDY = engine.SamplingParams(ignore_eos=True)
WAIT_S = 120  # every wait has a limit: a regression fails the test instead of hanging it


def request(n: int = 4) -> Request:
    return Request(model=TINY, prompt_ids=[1, 2, 3, 4], max_new_tokens=n, params=GREEDY)


def long_job() -> Job:
    """A sweep of 2,000 points of 250 tokens each (minutes on the tiny model): it is still running when killed."""
    return Job(model=TINY, name=lab_jobs.OUTPUT_SWEEP.name, args=([250] * 2000,), kwargs={"prompt_tokens": 4})


def wait_until(condition, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_killed_worker_fails_what_was_in_flight_and_the_next_request_completes():
    service = ProcessService(ServiceOptions(preload=TINY))
    try:
        running = service.submit(long_job())
        while not isinstance(running.events.get(timeout=WAIT_S), Progress):  # its first point is measured
            pass
        waiting = service.submit(request(240))  # a long answer: the sliced sweep lets it in at its next yield point
        while not isinstance(waiting.events.get(timeout=WAIT_S), Started):  # now both are in flight
            pass
        os.kill(service.pid, signal.SIGKILL)
        for work in (running, waiting):
            last = list(drain(work, timeout=WAIT_S))[-1]
            assert isinstance(last, Failed) and "engine worker stopped unexpectedly" in last.message
            assert "killed by signal 9" in last.message
        old_pid = service.pid
        trace = result_of(service.submit(request(5)), timeout=WAIT_S)  # a new worker, and its events reach us
        assert trace.n_output == 5 and service.pid != old_pid and service.alive()
    finally:
        service.close()


def test_status_during_a_crash_raises_and_metrics_still_answer():
    service = ProcessService(ServiceOptions(preload=TINY))
    http_server = None
    try:
        http_server = BackgroundServer(create_app(service, prepare(service, TINY, "tiny-llama", 4096)))
        assert metrics_of(http_server.url)["vllm:num_requests_running"] == 0
        os.kill(service.pid, signal.SIGSTOP)  # it cannot answer the scrape's status call...
        answer: list = []

        def scrape():
            host, port = http_server.url.split("://")[1].split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            answer.append((resp.status, resp.read().decode()))

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        wait_until(lambda: service._replies)  # ...which now waits for it
        os.kill(service.pid, signal.SIGKILL)  # and the worker dies during the call
        scraper.join(WAIT_S)
        assert answer and answer[0][0] == 200 and "vllm:num_requests_running" in answer[0][1]
        with pytest.raises(EngineError, match="engine worker is not running"):
            service.status()  # raised, never returned; a status check does not restart the worker
        assert result_of(service.submit(request(3)), timeout=WAIT_S).n_output == 3  # a request does
        assert service.status()["waiting"] == 0
    finally:
        if http_server is not None:
            http_server.stop()
        service.close()


def test_a_fatal_start_reaps_the_child(monkeypatch):
    started = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(EngineError, match="threads must be 0"):
        ProcessService(ServiceOptions(threads=-1))
    assert len(started) == 1 and started[0].returncode is not None  # waited for: no zombie left behind


def test_the_preload_runs_on_the_schedulers_thread(monkeypatch):
    callers = []
    real_get = ModelPool.get

    def get(self, spec, progress=None):
        callers.append(threading.current_thread())
        return real_get(self, spec, progress)

    monkeypatch.setattr(ModelPool, "get", get)
    service = LocalService(ServiceOptions(preload=TINY))
    try:
        assert callers == [service.scheduler._thread]
        assert service.scheduler.pool.owner is service.scheduler._thread
        assert result_of(service.submit(request(2)), timeout=WAIT_S).n_output == 2
    finally:
        service.close()


def test_a_failed_preload_is_a_clear_error_and_stops_the_scheduler():
    def schedulers() -> set:
        return {t for t in threading.enumerate() if t.name == "two-bends-scheduler" and t.is_alive()}

    before = schedulers()  # other tests' services (a page test's worker) may still be running: only this one counts
    with pytest.raises(EngineError, match="unknown device 'nowhere'"):
        LocalService(ServiceOptions(preload=ModelSpec("tiny-llama", "nowhere")))
    assert not schedulers() - before


def test_a_model_pool_serves_only_the_thread_that_first_used_it():
    pool = ModelPool(loader=lambda name, **kw: SimpleNamespace(name=name, kernels="plain"))  # what say_ready prints
    lm = pool.get(TINY)
    assert pool.get(TINY) is lm
    refused: list = []

    def other():
        try:
            pool.get(TINY)
        except EngineError as exc:
            refused.append(str(exc))

    thread = threading.Thread(target=other, name="not-the-scheduler")
    thread.start()
    thread.join(WAIT_S)
    assert refused and "not-the-scheduler" in refused[0] and "submit a Job" in refused[0]
