"""The console's view of sessions in worker_link: each session's work in flight, cancelled one by one or all at
once, and a session dropped with what it held (a fake worker records the cancels)."""
import threading
from types import SimpleNamespace

import pytest

from engine.serving.scheduling.work import Job, Request
from ui.engine_link import room_sessions, room_slots, worker_link
from ui.engine_link.run_store import LiveRun, RunStore


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
    work = room_sessions.sessions_work()
    assert list(work) == ["a"] and work["a"][0].work is run and work["a"][1] is job
    assert room_sessions.cancel_work("a", job.id) and cancelled == [job]
    job.cancel()  # what the real service does
    assert room_sessions.sessions_work()["a"] == [busy.live]  # a cancelled job is no longer listed in flight
    assert not room_sessions.cancel_work("a", 10**9) and not room_sessions.cancel_work("nobody", run.id)
    assert room_sessions.cancel_session("a") == 2 and cancelled[1:] == [run, job]


def test_cancelling_everything_lists_nothing_even_when_no_page_follows_the_job(fake_link):
    """The teacher's sweep runs while the teacher is on the console: after Cancel everything nothing is listed, though
    the sweep's page is not open to read the job's final event."""
    lk, cancelled = fake_link
    lk.service.cancel = lambda work: (cancelled.append(work), work.cancel())
    job = Job(name="sweep", label="prompt sweep")
    lk.stores["t"] = RunStore(jobs={"sweep": job})
    assert room_sessions.cancel_session("t") == 1 and cancelled == [job]
    assert room_sessions.sessions_work() == {}


def test_drop_session_cancels_and_empties_its_store(fake_link):
    lk, cancelled = fake_link
    run = Request(max_new_tokens=8)
    store = RunStore(live=LiveRun(run, 4, 8))
    store.labs["x"] = 1
    lk.stores["a"], lk.gone_since["a"] = store, 1.0
    room_sessions.drop_session("a")
    assert cancelled == [run] and "a" not in lk.stores and "a" not in lk.gone_since
    assert store.live is None and store.labs == {}


def test_a_closed_tab_frees_its_room_slot_and_the_engine():
    """A student's tab closed mid-run: after the grace period its request is cancelled and its slot is free (the
    janitor's sweep, with Streamlit's 'is this session alive' and the clock passed in)."""
    cancelled = []
    lk = object.__new__(worker_link._Link)  # no worker process: only the janitor's bookkeeping
    lk.service = SimpleNamespace(cancel=cancelled.append)
    lk.stores, lk.gone_since, lk.lock = {"student": RunStore(), "other": RunStore()}, {}, threading.Lock()
    lk.slots = room_slots.Slots()
    run = room_slots.Slots.watch(Request(prompt_ids=[1, 2, 3], max_new_tokens=64))
    lk.slots.hold("student", run)
    assert lk.slots.refusal("student") == room_slots.ONE_AT_A_TIME  # one run in flight: a second is refused

    alive = {"other"}
    assert lk.sweep(alive.__contains__, now=100.0) == []  # just gone: a reconnect within the grace keeps it
    assert cancelled == [] and lk.slots.refusal("student") == room_slots.ONE_AT_A_TIME
    assert lk.sweep(alive.__contains__, now=100.0 + worker_link.GRACE_S) == ["student"]
    assert cancelled == [run] and lk.slots.refusal("student") is None and "student" not in lk.stores
    assert "other" in lk.stores  # a live tab keeps everything


def test_a_second_run_to_the_rooms_serving_engine_is_refused_before_it_reaches_the_server(monkeypatch):
    """--engine-url in a room: a session's Run goes to the server through worker_link.submit, so the room's
    one-run-each rule holds there too; a second Run while the first is in flight never reaches the server."""
    from ui.engine_link import remote_engine, room_link

    lk = SimpleNamespace(slots=room_slots.Slots())
    monkeypatch.setattr(worker_link, "link", lambda: lk)
    monkeypatch.setattr(worker_link, "service", lambda: pytest.fail("a remote run must not use the local worker"))
    monkeypatch.setattr(worker_link, "get_script_run_ctx", lambda: SimpleNamespace(session_id="student"))
    monkeypatch.setattr(room_link, "settings", lambda: SimpleNamespace(enabled=True))
    monkeypatch.setattr(room_link, "room", lambda: SimpleNamespace(touch=lambda *a, **k: None))
    monkeypatch.setattr(remote_engine, "engine_url", lambda: "http://gpu-box:8000")
    sent = []
    monkeypatch.setattr(remote_engine, "submit", lambda work, url, spec: sent.append((work, url)))

    first, second = (Request(prompt_ids=[1, 2, 3], max_new_tokens=8) for _ in range(2))
    assert remote_engine.route(first, worker_link.submit) is None
    assert remote_engine.route(second, worker_link.submit) == room_slots.ONE_AT_A_TIME
    assert sent == [(first, "http://gpu-box:8000")]  # the refused one never left the dashboard


@pytest.mark.parametrize("raw,budget", [(None, None), ("", None), ("256", 256), ("-3", -3), ("2.5", "2.5")])
def test_the_dashboards_batch_mode_takes_its_token_budget_from_the_environment(monkeypatch, raw, budget):
    if raw is None:
        monkeypatch.delenv("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", raising=False)
    else:
        monkeypatch.setenv("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", raw)
    assert worker_link.options().max_num_batched_tokens == budget  # a bad one: the scheduler's one-line refusal


def test_dashboard_sh_refuses_a_token_budget_that_is_not_a_whole_number():
    import subprocess

    from tests import ROOT

    done = subprocess.run(["bash", "scripts/dashboard.sh", "--max-num-batched-tokens", "2.5", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-num-batched-tokens must be a whole number of tokens (got '2.5')" in done.stderr
