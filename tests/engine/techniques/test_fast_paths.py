"""The one mechanism every fast path goes through (engine/techniques/fast_paths.py), on a scripted path: a verdict
kept per machine and model, a loss never built again, a failure said and not kept, ties to what runs without it."""
import json
from dataclasses import replace

import pytest

from engine.core.backends import EAGER
from engine.techniques import fast_paths, measured_cache
from engine.techniques.fast_paths import MARGIN, Fit, Verdict, decide, failure, take_turns


class Scripted:
    """A fast path whose build, check and race do what the test says, counting the calls."""

    name, fast, rival = "scripted path", "fast", "rival"

    def __init__(self, ms=(7.0, 9.0), check=True, build_error=None, race_error=None):
        self.ms, self.ok, self.build_error, self.race_error = ms, check, build_error, race_error
        self.calls = {"build": 0, "check": 0, "race": 0}

    def timed_at(self, lm):
        return "per scripted step"

    def fit(self, lm, backends):
        return Fit.yes()

    def key(self, lm):
        return {"version": 1}

    def build(self, lm, backends, folder):
        self.calls["build"] += 1
        if self.build_error:
            raise self.build_error
        return "built"

    def check(self, lm, backends, built):
        self.calls["check"] += 1
        return self.ok

    def race(self, lm, backends, built):
        self.calls["race"] += 1
        if self.race_error:
            raise self.race_error
        return self.ms

    def attach(self, backends, built):
        return replace(backends, flat_decode=False)  # something to see


def _records(tmp_path) -> list[dict]:
    return [e["record"] for e in json.loads((tmp_path / measured_cache.CACHE_FILE).read_text()).values()]


def test_a_first_load_builds_checks_races_and_keeps_the_verdict(tiny_llama, tmp_path):
    path = Scripted()
    backends, verdict = decide(path, tiny_llama, EAGER, tmp_path)
    assert backends.flat_decode is False and verdict.use and not verdict.cached
    assert path.calls == {"build": 1, "check": 1, "race": 1}
    assert verdict.words(path).startswith("scripted path: used (fast 7.00 ms vs rival 9.00 ms per scripted step; "
                                          "measured now; building and checking took")
    (record,) = _records(tmp_path)
    assert record["use"] is True and record["fast_ms"] == 7.0 and "cached" not in record


def test_a_verdict_that_it_won_is_checked_again_but_not_raced(tiny_llama, tmp_path):
    decide(Scripted(), tiny_llama, EAGER, tmp_path)
    again = Scripted()
    backends, verdict = decide(again, tiny_llama, EAGER, tmp_path)
    assert backends.flat_decode is False and verdict.cached and "cached verdict" in verdict.words(again)
    assert again.calls == {"build": 1, "check": 1, "race": 0}


def test_a_verdict_that_it_lost_is_never_built_again(tiny_llama, tmp_path):
    decide(Scripted(ms=(9.5, 9.0)), tiny_llama, EAGER, tmp_path)
    again = Scripted()
    backends, verdict = decide(again, tiny_llama, EAGER, tmp_path)
    assert backends == EAGER and not verdict.use and again.calls == {"build": 0, "check": 0, "race": 0}
    assert verdict.words(again).startswith("scripted path: not used (fast 9.50 ms vs rival 9.00 ms")
    remeasured = Scripted()
    assert decide(remeasured, tiny_llama, EAGER, tmp_path, remeasure=True)[1].use  # bench --remeasure-kernels
    assert remeasured.calls["race"] == 1


def test_ties_go_to_what_runs_without_it(tiny_llama, tmp_path):
    backends, verdict = decide(Scripted(ms=(9.0 * (1 - MARGIN / 2), 9.0)), tiny_llama, EAGER, tmp_path)
    assert backends == EAGER and not verdict.use


@pytest.mark.parametrize("error, said", [(RuntimeError("gcc failed: no"), "could not build it here: RuntimeError: gcc "
                                                                            "failed: no"),
                                         (MemoryError(), "could not build it here: MemoryError")])
def test_a_build_that_fails_is_said_and_tried_again_at_the_next_load(tiny_llama, tmp_path, error, said):
    path = Scripted(build_error=error)
    backends, verdict = decide(path, tiny_llama, EAGER, tmp_path)
    assert backends == EAGER and verdict.note == said and verdict.words(path) == f"scripted path: not used ({said})"
    assert not (tmp_path / measured_cache.CACHE_FILE).exists()  # a failure is not a measurement


def test_a_race_that_fails_is_said_and_not_kept(tiny_llama, tmp_path):
    backends, verdict = decide(Scripted(race_error=RuntimeError("no room")), tiny_llama, EAGER, tmp_path)
    assert backends == EAGER and verdict.note == "could not time it here: RuntimeError: no room"
    assert not (tmp_path / measured_cache.CACHE_FILE).exists()


def test_other_outputs_are_refused_and_the_refusal_kept(tiny_llama, tmp_path):
    path = Scripted(check=False)
    backends, verdict = decide(path, tiny_llama, EAGER, tmp_path)
    assert backends == EAGER and verdict.note == "its outputs differed from the rival's" and path.calls["race"] == 0
    assert _records(tmp_path)[0]["use"] is False
    assert decide(Scripted(), tiny_llama, EAGER, tmp_path)[0] == EAGER  # never built again


def test_a_record_of_another_shape_is_measured_again(tiny_llama, tmp_path):
    decide(Scripted(), tiny_llama, EAGER, tmp_path)
    data = json.loads((tmp_path / measured_cache.CACHE_FILE).read_text())
    for entry in data.values():
        del entry["record"]["at"]  # as an older version wrote it
    (tmp_path / measured_cache.CACHE_FILE).write_text(json.dumps(data))
    again = Scripted()
    decide(again, tiny_llama, EAGER, tmp_path)
    assert again.calls["race"] == 1


def test_the_one_switch_forces_the_eager_reference(tiny_llama, monkeypatch):
    from engine.techniques.kernels import with_decode_step, with_kernels

    monkeypatch.setenv(fast_paths.SWITCH, "plain")
    forced = with_kernels(with_kernels(tiny_llama, "plain"), "fast")
    assert forced.backends == EAGER and forced.kernel_choice == "fast"
    assert forced.kernels == "plain (forced by TWO_BENDS_BACKENDS=plain)"
    assert with_decode_step(forced) is forced  # nor a decode step after it (the dashboard's second stage)
    monkeypatch.setenv(fast_paths.SWITCH, "default")
    assert fast_paths.forced_plain() == ""


def test_a_disturbed_race_is_used_and_raced_again_at_the_next_loads(tiny_llama, tmp_path, monkeypatch):
    """Other programs held the CPU for much of a race: its outcome stands for this load only; the next loads race
    again (MAX_TRIES in all), and the least disturbed race is kept."""
    from engine.host.cpu_wait import Wait
    from engine.techniques import kernel_choice

    waits = [0.6, 0.9, 0.3]

    class Busy:
        available = True

        def mark(self):
            pass

        def lap(self):
            return Wait(waits.pop(0), 0.0)

    clock = iter(range(100))
    monkeypatch.setattr(kernel_choice, "WaitMeter", Busy)
    monkeypatch.setattr(fast_paths.time, "perf_counter", lambda: float(next(clock)))  # every race takes 1 s
    first = Scripted(ms=(7.0, 9.0))
    _, verdict = decide(first, tiny_llama, EAGER, tmp_path)
    assert verdict.use and verdict.disturbed and verdict.tries == 1
    assert "other programs held the CPU for 0.60 s of the 1.00 s raced" in verdict.words(first)
    assert "raced again at the next load, try 1 of 3" in verdict.words(first)
    second = Scripted(ms=(9.5, 9.0))  # raced again (90 %: worse): the first race stands
    _, verdict = decide(second, tiny_llama, EAGER, tmp_path)
    assert second.calls["race"] == 1 and verdict.use and verdict.fast_ms == 7.0 and verdict.tries == 2
    third = Scripted(ms=(9.5, 9.0))  # 30 %: the least disturbed, kept; the tries are spent
    backends, verdict = decide(third, tiny_llama, EAGER, tmp_path)
    assert third.calls["race"] == 1 and not verdict.use and verdict.tries == 3 and backends == EAGER
    assert "the least disturbed of 3 tries, kept" in verdict.words(third)
    fourth = Scripted()
    _, verdict = decide(fourth, tiny_llama, EAGER, tmp_path)
    assert fourth.calls == {"build": 0, "check": 0, "race": 0} and verdict.cached and not verdict.use


def test_verdicts_and_failures_read_in_one_line():
    assert failure(RuntimeError("a\n  b")) == "RuntimeError: a b" and failure(MemoryError()) == "MemoryError"
    path = Scripted()
    assert Verdict(True, 14.0, 11.0, 0.6, at="x").words(path) == (
        "scripted path: used (fast 14.0 ms vs rival 11.0 ms x; measured now; building and checking took 0.6 s)")


def test_taking_turns_keeps_each_timers_best_round():
    order, times = [], {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 6.0, 4.0])}
    best = take_turns({name: (lambda name=name: order.append(name) or next(times[name])) for name in "ab"}, 3)
    assert best == {"a": 1.0, "b": 4.0} and order == ["b", "a", "a", "b", "b", "a"]


def test_a_decode_step_that_lost_a_disturbed_race_stops_the_costlier_candidates(tiny_llama, tmp_path, monkeypatch):
    """On a busy machine the C step can lose a race it wins on a quiet one: torch.compile's step (seconds to minutes
    to compile) is not tried in that load; the next load races the C step again."""
    from engine.host.cpu_wait import Wait
    from engine.techniques import kernel_choice, kernels

    class Busy:
        available = True

        def mark(self):
            pass

        def lap(self):
            return Wait(60.0, 0.0)  # more than any race's own time: disturbed

    class NeverBuilt(Scripted):
        name = "a costlier path"

        def build(self, lm, backends, folder):
            raise AssertionError("tried after a disturbed loss")

    monkeypatch.setattr(kernel_choice, "WaitMeter", Busy)
    monkeypatch.setattr(kernels, "DECODE_STEPS", (Scripted(ms=(9.5, 9.0)), NeverBuilt()))
    stepless = kernels.without_decode_step(tiny_llama)
    lm = kernels.with_decode_step(stepless, tmp_path)
    assert lm.backends.decode_step is None and "raced again at the next load, try 1 of 3" in lm.kernel_why
    assert "a costlier path" not in lm.kernel_why
