"""ui/room/saver.py: browsers' kept runs go to the room's file when they change (light copies, within the same budgets
the server keeps in memory), come back after a restart under the same cookie token, and a run in flight when the
server died comes back as interrupted, never as finished (looks driven by hand: no thread, no sleeping but SETTLE_S)."""
import copy
import dataclasses

import pytest

import engine
from engine.serving.scheduling.work import Done, Request
from ui.engine_link.run_store import Browsers, RunStore, nbytes
from ui.room import saver as saver_module
from ui.room.keeper import Keeper
from ui.room.saver import RunSaver
from ui.room.slots import Slots


class LabResult:
    """Stands for a lab's result object (the labs' own are engine classes)."""


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "The valley and the bridge", 6, capture_attention=True, ignore_eos=True)


def server(tmp_path, kept_bytes=10 * 2**20, total_bytes=512 * 2**20):
    browsers = Browsers()
    keeper = Keeper(tmp_path)
    return browsers, keeper, RunSaver(keeper, browsers, kept_bytes, total_bytes)


def test_kept_runs_come_back_after_a_restart_under_the_same_token(tmp_path, trace):
    browsers, keeper, saver = server(tmp_path)
    token, runs = browsers.visit(None, "tab", now=0.0)
    store = RunStore(runs=runs)
    store.keep(trace)
    store.labs["sweep"] = {"prompt": [1, 2, 3]}
    saver.tick()
    del browsers, keeper, saver  # kill -9

    browsers, _, saver = server(tmp_path)
    assert saver.read_back() == 1
    again, runs = browsers.visit(token, "tab after the restart", now=1.0)
    assert again == token and len(runs.history) == 1 and runs.labs == {"sweep": {"prompt": [1, 2, 3]}}
    back = runs.last_trace
    assert back.output_ids == trace.output_ids and [s.seconds for s in back.steps] == [s.seconds for s in trace.steps]
    assert back.attention is None  # light: the pages capture attention again from the run's tokens


def test_only_what_changed_is_written(tmp_path, trace, monkeypatch):
    browsers, keeper, saver = server(tmp_path)
    writes = []
    real = keeper.save_runs
    monkeypatch.setattr(keeper, "save_runs", lambda token, runs, seen: writes.append(token) or real(token, runs, seen))
    token, runs = browsers.visit(None, "tab", now=0.0)
    saver.tick()
    saver.tick()
    assert writes == [token]  # once (a new browser), then nothing changed
    RunStore(runs=runs).keep(trace)
    saver.tick()
    runs.labs["batch"] = LabResult()  # a lab result stored: changed again
    saver.tick()
    saver.tick()
    assert writes == [token] * 3


def test_the_file_keeps_each_browser_within_its_budget_and_all_within_the_total(tmp_path, trace):
    light = dataclasses.replace(trace, attention=None, kv_key_norms=None, kv_value_norms=None)
    per_browser = nbytes(light) * 3
    browsers, keeper, saver = server(tmp_path, kept_bytes=per_browser)
    tokens = []
    for i in range(4):
        token, runs = browsers.visit(None, f"tab-{i}", now=float(i))
        for _ in range(10):
            RunStore(runs=runs).keep(copy.deepcopy(trace))  # runs of their own (shared objects pickle once)
        tokens.append(token)
        saver.tick()
        if i == 0:
            saver.total_bytes = keeper.run_sizes()[0][1] * 2 + 100  # room in the file for about two browsers
    sizes = keeper.run_sizes()
    assert all(size <= per_browser for _, size, _ in sizes)
    assert sum(size for _, size, _ in sizes) <= saver.total_bytes
    assert [t for t, _, _ in sizes] == tokens[2:]  # the browsers saved longest ago left the file first
    browsers.drop([tokens[-1]])  # a browser the server forgot (a cleared room, ABANDON_S) leaves the file too
    saver.tick()
    assert tokens[-1] not in {t for t, _, _ in keeper.run_sizes()}


def test_a_run_in_flight_when_the_server_died_comes_back_interrupted_never_finished(tmp_path, trace, monkeypatch):
    browsers, keeper, saver = server(tmp_path)
    token, runs = browsers.visit(None, "tab", now=0.0)
    done_run = Slots.watch(Request(prompt_ids=[1] * 64, max_new_tokens=32))
    saver.flight(done_run, token)
    done_run.emit(Done(trace))
    RunStore(runs=runs).keep(trace)  # the run panel keeps it as soon as the final event arrives
    monkeypatch.setattr(saver_module, "SETTLE_S", 0.0)
    saver.tick()  # its result is saved: its note leaves the file
    cut = Slots.watch(Request(prompt_ids=[1] * 16, max_new_tokens=8))
    saver.flight(cut, token)  # in the engine when the server is killed
    saver.tick()
    assert [f.what for f in keeper.flights()] == ["16 → 8 tokens"]
    del browsers, keeper, saver

    browsers, keeper, saver = server(tmp_path)
    saver.read_back()
    _, runs = browsers.visit(token, "tab after the restart", now=1.0)
    assert len(runs.history) == 1  # the finished run, intact; the cut one is not among them
    assert [what for _, what, _ in runs.interrupted] == ["16 → 8 tokens"]
    saver.seen_interrupted(runs)  # the page said so
    assert runs.interrupted == [] and keeper.flights() == []


def test_a_first_run_cut_short_is_told_to_a_browser_that_had_kept_nothing(tmp_path):
    browsers, keeper, saver = server(tmp_path)
    saver.flight(Slots.watch(Request(prompt_ids=[1] * 4, max_new_tokens=4)), "a-browser-token-with-no-runs-yet")
    browsers, _, saver = server(tmp_path)
    saver.read_back()
    _, runs = browsers.visit("a-browser-token-with-no-runs-yet", "tab", now=1.0)
    assert [what for _, what, _ in runs.interrupted] == ["4 → 4 tokens"] and runs.history == []


def test_runs_that_cannot_be_pickled_stay_in_memory_said_once_and_the_rest_is_saved(tmp_path, trace):
    browsers, keeper, saver = server(tmp_path)
    odd, odd_runs = browsers.visit(None, "tab-1", now=0.0)
    odd_runs.labs["live"] = lambda: None  # something a file cannot hold
    fine, fine_runs = browsers.visit(None, "tab-2", now=0.0)
    RunStore(runs=fine_runs).keep(trace)
    for _ in range(saver_module.GIVE_UP_AFTER + 2):
        saver.tick()
    assert keeper.saving and {t for t, _, _ in keeper.run_sizes()} == {fine}
    assert sum("could not be saved" in line for line in keeper.notes) == 1
