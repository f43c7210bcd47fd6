"""The console's view of sessions in the worker link: each session's work in flight, cancelled one by one or all at
once, and a session dropped with what it held (a fake worker records the cancels)."""
import threading
from types import SimpleNamespace

import pytest

from engine.serving.scheduling.work import Job, Request
from ui.engine_link import worker_link
from ui.engine_link.run_store import LiveRun, RunStore
from ui.room import sessions


@pytest.fixture
def fake_link(monkeypatch):
    cancelled = []
    service = SimpleNamespace(cancel=cancelled.append)
    lk = SimpleNamespace(stores={}, gone_since={}, lock=threading.Lock(), service=service)
    monkeypatch.setattr(worker_link, "link", lambda: lk)
    monkeypatch.setattr(worker_link, "service", lambda: service)
    return lk, cancelled


def test_sessions_work_lists_requests_and_jobs_and_cancels_them(fake_link):
    lk, cancelled = fake_link
    run, job = Request(max_new_tokens=8), Job(name="sweep", label="prompt sweep")
    busy = RunStore(live=LiveRun(run, 4, 8), jobs={"lab": job})
    lk.stores.update(a=busy, b=RunStore())
    work = sessions.sessions_work()
    assert list(work) == ["a"] and work["a"][0].work is run and work["a"][1] is job
    assert sessions.cancel_work("a", job.id) and cancelled == [job]
    job.cancel()  # what the real service does
    assert sessions.sessions_work()["a"] == [busy.live]  # a cancelled job is no longer listed in flight
    assert not sessions.cancel_work("a", 10**9) and not sessions.cancel_work("nobody", run.id)
    assert sessions.cancel_session("a") == 2 and cancelled[1:] == [run, job]


def test_cancelling_everything_lists_nothing_even_when_no_page_follows_the_job(fake_link):
    """The teacher's sweep runs while the teacher is on the console: after Cancel everything nothing is listed, though
    the sweep's page is not open to read the job's final event."""
    lk, cancelled = fake_link
    lk.service.cancel = lambda work: (cancelled.append(work), work.cancel())
    job = Job(name="sweep", label="prompt sweep")
    lk.stores["t"] = RunStore(jobs={"sweep": job})
    assert sessions.cancel_session("t") == 1 and cancelled == [job]
    assert sessions.sessions_work() == {}


def test_drop_session_cancels_and_empties_its_store(fake_link):
    lk, cancelled = fake_link
    run = Request(max_new_tokens=8)
    store = RunStore(live=LiveRun(run, 4, 8))
    store.labs["x"] = 1
    lk.stores["a"], lk.gone_since["a"] = store, 1.0
    sessions.drop_session("a")
    assert cancelled == [run] and "a" not in lk.stores and "a" not in lk.gone_since
    assert store.live is None and store.labs == {}
