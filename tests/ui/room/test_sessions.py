"""The console's view of sessions: each session's work in the engine from the room's slots (waiting until the engine's
own Started event, then running; a lab job as a lab), cancelled one by one or all at once, and a session dropped
with what it held (a fake worker records the cancels)."""
import threading
from types import SimpleNamespace

import pytest

from engine.serving.scheduling.work import Done, Job, Request, Started
from ui.engine_link import worker_link
from ui.engine_link.run_store import LiveRun, RunStore
from ui.room import current, sessions
from ui.room.slots import Slots


@pytest.fixture
def fake_link(monkeypatch):
    cancelled = []
    service = SimpleNamespace(cancel=lambda work: (cancelled.append(work), work.cancel()))  # as the real one does
    lk = SimpleNamespace(stores={}, gone_since={}, lock=threading.Lock(), service=service)
    slots = Slots()
    monkeypatch.setattr(worker_link, "link", lambda: lk)
    monkeypatch.setattr(worker_link, "service", lambda: service)
    monkeypatch.setattr(current, "slots", lambda: slots)
    return lk, slots, cancelled


def held(slots, sid, work):
    Slots.watch(work)
    slots.hold(sid, work)
    return work


def test_the_engines_own_events_say_waiting_running_or_lab(fake_link):
    _, slots, _ = fake_link
    run = held(slots, "a", Request(prompt_ids=[1] * 64, max_new_tokens=32))
    held(slots, "t", Job(name="prompt_sweep", label="prompt-length sweep"))
    run.arrival = 10.0
    now = sessions.in_the_engine(now=12.5)
    assert now["a"].state == "waiting" and now["a"].what == "64 → 32 tokens" and now["a"].wait == "2.5 s so far"
    assert now["t"].state == "lab" and now["t"].what == "prompt-length sweep"
    run.emit(Started(queue_seconds=3.25))  # nobody read it yet: the engine said it, that is enough
    assert sessions.in_the_engine()["a"].state == "running" and sessions.in_the_engine()["a"].wait == "3.2 s"
    run.emit(Done(None))
    assert set(sessions.in_the_engine()) == {"t"}


def test_cancel_one_or_a_sessions_everything(fake_link):
    lk, slots, cancelled = fake_link
    run = held(slots, "a", Request(max_new_tokens=8))
    job = Job(name="sweep", label="prompt sweep")
    lk.stores["a"] = RunStore(live=LiveRun(run, 4, 8), jobs={"lab": job})
    assert not sessions.cancel("a", 10**9) and not sessions.cancel("nobody", run.id)
    assert sessions.cancel("a", run.id) and cancelled == [run]
    assert sessions.in_the_engine() == {}  # a cancelled run is no longer in flight
    assert sessions.cancel_session("a") == 1 and cancelled[1:] == [job]  # what is left: the lab job


def test_drop_session_cancels_frees_its_slot_and_empties_its_store(fake_link):
    lk, slots, cancelled = fake_link
    run = held(slots, "a", Request(max_new_tokens=8))
    store = RunStore(live=LiveRun(run, 4, 8))
    store.labs["x"] = 1
    lk.stores["a"], lk.gone_since["a"] = store, 1.0
    sessions.drop_session("a")
    assert cancelled == [run] and "a" not in lk.stores and "a" not in lk.gone_since
    assert store.live is None and store.labs == {} and slots.release("a") is None
