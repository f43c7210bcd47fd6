"""A browser's runs on the server: found again by its token, never by another browser's, shrunk when no tab is
open and dropped after ABANDON_S or beyond the total budget (times passed in: no clock, no sleeping)."""
import dataclasses

import pytest

import engine
from ui.engine_link import run_store
from ui.engine_link.run_store import ABANDON_S, KEPT_BYTES, Browsers, RunStore


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "The valley and the bridge", 6, capture_attention=True, ignore_eos=True)


def test_a_token_finds_its_runs_and_an_unknown_one_gets_a_new_token(trace):
    kept = Browsers()
    token, runs = kept.visit(None, "tab-1", now=0.0)
    assert len(token) >= 40
    RunStore(runs=runs).keep(trace)
    again, same = kept.visit(token, "after-F5", now=5.0)  # F5 / a second tab: same cookie
    assert again == token and same is runs and same.history and same.last_trace is trace
    other, theirs = kept.visit("made-up-token", "stranger", now=6.0)  # a cookie this server never gave
    assert other not in (token, "made-up-token") and theirs.history == [] and theirs.last_trace is None


def test_work_in_flight_stays_with_its_session_the_runs_with_the_browser(trace):
    kept = Browsers()
    _, runs = kept.visit(None, "a", now=0.0)
    first, second = RunStore(runs=runs), RunStore(runs=runs)
    first.jobs["lab"] = object()
    first.keep(trace)
    assert second.last_trace is trace and second.jobs == {} and second.in_flight() == []
    first.forget_work()
    assert first.jobs == {} and second.history  # a closed tab's work goes, the browser's runs stay


def test_a_browser_with_no_tab_open_is_kept_then_dropped_after_abandon_s(trace):
    kept = Browsers()
    token, runs = kept.visit(None, "a", now=0.0)
    RunStore(runs=runs).keep(trace)
    kept.sweep(lambda sid: True, now=ABANDON_S + 10)  # the tab is open: a visit
    kept.sweep(lambda sid: False, now=ABANDON_S + 20)  # closed
    assert kept.visit(token, "b", now=2 * ABANDON_S)[1] is runs  # back within ABANDON_S of the last visit
    kept.sweep(lambda sid: False, now=2 * ABANDON_S + 1)
    assert len(kept) == 1
    assert kept.sweep(lambda sid: False, now=3 * ABANDON_S + 1) and len(kept) == 0
    assert kept.visit(token, "c", now=3 * ABANDON_S + 2)[0] != token


def test_a_closed_browser_is_shrunk_to_the_budget(trace, monkeypatch):
    kept = Browsers()
    _, runs = kept.visit(None, "a", now=0.0)
    store = RunStore(runs=runs)
    for _ in range(5):
        store.keep(trace)
    store.labs["big"] = bytes(2 * KEPT_BYTES)
    assert runs.nbytes() > KEPT_BYTES and runs.last_trace.attention is not None
    kept.sweep(lambda sid: True, now=1.0)
    assert runs.labs  # a tab is open: nothing is taken
    kept.sweep(lambda sid: False, now=2.0)
    assert runs.nbytes() <= KEPT_BYTES and "big" not in runs.labs and len(runs.history) == 5
    assert runs.last_trace is not None  # the run shown survives, without what a fresh capture brings back

    monkeypatch.setattr(run_store, "KEPT_BYTES", run_store.nbytes(dataclasses.replace(trace, attention=None)) * 2)
    _, small = kept.visit(None, "b", now=3.0)
    other = RunStore(runs=small)
    for _ in range(6):
        other.keep(trace)
    kept.sweep(lambda sid: False, now=4.0)
    assert small.last_trace.attention is None and 1 <= len(small.history) < 6  # the oldest runs went first


def test_beyond_the_total_budget_the_least_recently_seen_browser_goes(trace, monkeypatch):
    kept = Browsers()
    old, runs_old = kept.visit(None, "a", now=0.0)
    new, runs_new = kept.visit(None, "b", now=10.0)
    RunStore(runs=runs_old).keep(trace)
    RunStore(runs=runs_new).keep(trace)
    monkeypatch.setattr(run_store, "KEPT_TOTAL_BYTES", runs_new.nbytes() + 1)
    kept.sweep(lambda sid: False, now=20.0)
    assert len(kept) == 1 and kept.visit(new, "b2", now=21.0)[1] is runs_new
    assert kept.visit(old, "a2", now=22.0)[0] != old


def test_tests_may_still_build_a_store_from_its_parts(trace):
    store = RunStore(last_trace=trace, labs={"x": 1})
    assert store.last_trace is trace and store.labs == {"x": 1} and store.history == []
    store.clear()
    assert store.last_trace is None and store.labs == {}
