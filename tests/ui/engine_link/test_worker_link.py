"""The dashboard's link to the engine worker: a closed tab's work is cancelled after the grace (freeing a room's slot
with it), a room's one-run-each rule holds for a serving engine too, and the worker's settings from the environment."""
import threading
from types import SimpleNamespace

import pytest

from engine.serving.scheduling.work import Request
from ui import state
from ui.engine_link import server_link, worker_link
from ui.engine_link.run_store import RunStore
from ui.room import slots as room_slots
from ui.room.admission import Admission
from ui.room.registry import Room


def test_a_closed_tab_frees_its_room_slot_and_the_engine():
    """A student's tab closed mid-run: after the grace period its request is cancelled, which frees its room slot
    too (the janitor's sweep, with Streamlit's 'is this session alive' and the clock passed in)."""
    cancelled = []
    lk = object.__new__(server_link.ServerLink)  # no worker process: only the janitor's bookkeeping
    lk.service = SimpleNamespace(cancel=lambda work: (cancelled.append(work), work.cancel()))  # as the real one does
    lk.stores, lk.gone_since, lk.lock = {"student": RunStore(), "other": RunStore()}, {}, threading.Lock()
    slots = room_slots.Slots()
    run = room_slots.Slots.watch(Request(prompt_ids=[1, 2, 3], max_new_tokens=64))
    slots.hold("student", run)
    lk.stores["student"].live = SimpleNamespace(work=run, finished=False)
    assert slots.refusal("student") == room_slots.ONE_AT_A_TIME  # one run in flight: a second is refused

    alive = {"other"}
    assert lk.sweep(alive.__contains__, now=100.0) == []  # just gone: a reconnect within the grace keeps it
    assert cancelled == [] and slots.refusal("student") == room_slots.ONE_AT_A_TIME
    assert lk.sweep(alive.__contains__, now=100.0 + server_link.GRACE_S) == ["student"]
    assert cancelled == [run] and slots.refusal("student") is None and "student" not in lk.stores
    assert "other" in lk.stores  # a live tab keeps everything


def test_a_second_run_to_the_rooms_serving_engine_is_refused_before_it_reaches_the_server(monkeypatch):
    """--engine-url in a room: a session's Run goes to the server through worker_link.submit_run, so the room's
    one-run-each rule holds there too; a second Run while the first is in flight never reaches the server."""
    from ui.engine_link import remote_engine, remote_measure

    rules = Admission(Room(), room_slots.Slots(), "student", "student")
    monkeypatch.setattr(worker_link, "service", lambda: pytest.fail("a remote run must not use the local worker"))
    monkeypatch.setattr(worker_link, "get_script_run_ctx", lambda: SimpleNamespace(session_id="student"))
    monkeypatch.setattr(worker_link.st, "session_state", {state.ROOM_RULES: rules})
    monkeypatch.setattr(remote_measure, "engine_url", lambda: "http://gpu-box:8000")
    sent = []
    monkeypatch.setattr(remote_engine.RemoteEngine, "submit", lambda engine, work: sent.append((work, engine.url)))

    first, second = (Request(prompt_ids=[1, 2, 3], max_new_tokens=8) for _ in range(2))
    assert worker_link.submit_run(first) is None
    assert worker_link.submit_run(second) == room_slots.ONE_AT_A_TIME
    assert sent == [(first, "http://gpu-box:8000")]  # the refused one never left the dashboard


def test_an_engine_url_off_the_allow_list_refuses_every_run_and_sends_none(monkeypatch):
    monkeypatch.setattr(worker_link, "service", lambda: pytest.fail("a refused URL must not fall back to the worker"))
    monkeypatch.setenv("TWO_BENDS_ENGINE_URL", "http://gpu-box:8000")
    monkeypatch.delenv("TWO_BENDS_MEASURE_HOSTS", raising=False)
    refused = worker_link.submit_run(Request(prompt_ids=[1, 2, 3], max_new_tokens=8))
    assert refused.startswith("the room's engine URL http://gpu-box:8000 is refused")


def test_the_local_worker_and_a_remote_server_are_one_client_interface():
    """Both engines a Run may go to answer submit, cancel and status (ui/engine_link/client.py)."""
    from engine.serving.scheduling.work import ServiceOptions
    from engine.serving.scheduling.worker import LocalService, ProcessService
    from ui.engine_link.client import EngineClient
    from ui.engine_link.remote_engine import RemoteEngine

    remote = RemoteEngine("http://gpu-box:8000")
    assert isinstance(remote, EngineClient) and remote.status() == {"mode": "remote", "url": "http://gpu-box:8000"}
    for cls in (LocalService, ProcessService):
        assert all(callable(getattr(cls, name, None)) for name in ("submit", "cancel", "status")), cls
    local = LocalService(ServiceOptions())
    try:
        assert isinstance(local, EngineClient) and local.status()["mode"] == "queue"
    finally:
        local.close()


@pytest.mark.parametrize("raw,budget", [(None, None), ("", None), ("256", 256), ("-3", -3), ("2.5", "2.5")])
def test_the_dashboards_batch_mode_takes_its_token_budget_from_the_environment(monkeypatch, raw, budget):
    if raw is None:
        monkeypatch.delenv("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", raising=False)
    else:
        monkeypatch.setenv("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", raw)
    assert server_link.options().max_num_batched_tokens == budget  # a bad one: the scheduler's one-line refusal


def test_dashboard_sh_refuses_a_token_budget_that_is_not_a_whole_number():
    import subprocess

    from tests import ROOT

    done = subprocess.run(["bash", "scripts/dashboard.sh", "--max-num-batched-tokens", "2.5", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-num-batched-tokens must be a whole number of tokens (got '2.5')" in done.stderr
