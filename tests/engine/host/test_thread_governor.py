"""The decode loop's threads chosen by measurement: the policy on scripted windows, and a run that records them."""
import json

import pytest
import torch

from engine.core import generate as generate_module
from engine.core.generate import generate
from engine.core.trace_check import check_fields
from engine.host.run_watch import RunWatch
from engine.host.thread_governor import ThreadGovernor, read_idle_seconds, thread_choices

MS = 1e-3


class Clock:
    """perf_counter and /proc/stat's idle seconds, moved by the test."""

    def __init__(self):
        self.t, self.idle = 0.0, 0.0

    def advance(self, seconds: float, idle_cores: float) -> None:
        self.t += seconds
        self.idle += seconds * idle_cores


def governor(most=2, idle: float | None = 0.0, window=4):
    clock = Clock()
    g = ThreadGovernor(most, window=window, idle_seconds=lambda: None if idle is None else clock.idle,
                       clock=lambda: clock.t)
    return g, clock


def window(g: ThreadGovernor, clock: Clock, step_ms: float, wait_ms: float, idle_cores: float = 0.0) -> int:
    """One window of equal steps; returns the threads the governor answered after it."""
    for _ in range(g.window):
        clock.advance(step_ms * MS, idle_cores)
        threads = g.observe(step_ms * MS, wait_ms * MS)
    return threads


def test_choices_halve_down_to_one():
    assert thread_choices(2) == [2, 1] and thread_choices(8) == [8, 4, 2, 1] and thread_choices(3) == [3, 1]
    assert thread_choices(1) == [1]


def test_a_quiet_machine_never_changes_or_tries_anything():
    g, clock = governor()
    for _ in range(20):
        assert window(g, clock, 15.0, 0.1) == 2
    assert g.trials == 0 and g.changes == [] and g.note() == ""


def test_a_page_drawing_beside_the_steps_tries_nothing():
    """A browser drawing now and then made the steps wait ~a quarter of their time, and one thread was slower there
    (2-vCPU AVX2 host): below WAIT_SHARE nothing is tried; a core held (~half the time waiting) still tries."""
    g, clock = governor()
    for _ in range(6):
        assert window(g, clock, 47.0, 13.0) == 2  # 28 % waiting
    assert g.trials == 0
    assert window(g, clock, 105.0, 49.0) == 1 and g.trials == 1  # 47 %: a trial with one thread


def test_waiting_steps_try_fewer_threads_and_keep_them_when_faster():
    g, clock = governor()
    assert window(g, clock, 31.0, 12.0) == 1  # 39 % of the steps waiting for a CPU: a trial with one thread
    assert window(g, clock, 19.0, 0.0) == 1  # faster by more than the margin: kept
    assert [(c.step, c.threads) for c in g.changes] == [(4, 1)]
    assert g.note() == ("from step 5 on 1 thread(s) (the steps had waited for a CPU 39% of their time; measured "
                        "19.0 ms a step with 1, 31.0 ms with 2)")
    assert window(g, clock, 19.0, 0.0, idle_cores=0.0) == 1  # no idle core: no trial upward


def test_a_trial_that_is_not_faster_goes_back_and_waits_longer_each_time():
    g, clock = governor()
    assert window(g, clock, 20.0, 8.0) == 1  # trial
    assert window(g, clock, 20.0, 0.0) == 2  # not 5 % faster: back to two threads
    assert g.changes == [] and g.note() == ""
    assert window(g, clock, 20.0, 8.0) == 2  # held for one window
    assert window(g, clock, 20.0, 8.0) == 1  # then tried again
    assert window(g, clock, 21.0, 0.0) == 2  # lost again: held for two windows now
    assert window(g, clock, 20.0, 8.0) == 2 and window(g, clock, 20.0, 8.0) == 2
    assert window(g, clock, 20.0, 8.0) == 1
    assert g.trials == 3


def test_idle_cores_bring_the_threads_back_when_that_is_faster():
    g, clock = governor()
    window(g, clock, 31.0, 12.0)
    window(g, clock, 19.0, 0.0)  # one thread kept
    assert window(g, clock, 19.0, 0.0, idle_cores=1.0) == 2  # the other core idle for the window: a trial with two
    assert window(g, clock, 14.5, 0.0) == 2  # faster: kept
    assert [c.threads for c in g.changes] == [1, 2]
    assert "then from step 13 on 2 thread(s) (1.0 core(s) idle; measured 14.5 ms a step with 2" in g.note()


def test_a_core_busy_part_of_the_time_still_allows_a_trial_upward_and_the_trial_decides():
    # one thread kept beside a program that held a core (no idle time); then that program draws only now and then
    g, clock = governor()
    window(g, clock, 31.0, 12.0)
    window(g, clock, 19.0, 0.0)
    assert window(g, clock, 19.0, 0.0, idle_cores=0.1) == 1  # a tenth of a core idle: below UP_IDLE, no trial
    assert window(g, clock, 19.0, 0.0, idle_cores=0.4) == 2  # 0.4 of a core idle: a trial with two threads
    assert window(g, clock, 17.0, 0.0) == 2  # 11 % faster: kept
    assert [c.threads for c in g.changes] == [1, 2] and "0.4 core(s) idle" in g.note()
    g, clock = governor()
    window(g, clock, 31.0, 12.0)
    window(g, clock, 19.0, 0.0)
    assert window(g, clock, 19.0, 0.0, idle_cores=0.4) == 2
    assert window(g, clock, 19.5, 0.0) == 1  # not faster: back to one, and held
    assert window(g, clock, 19.0, 0.0, idle_cores=0.4) == 1


def test_without_an_idle_reading_it_still_tries_upward_now_and_then():
    g, clock = governor(idle=None)
    window(g, clock, 31.0, 12.0)
    window(g, clock, 19.0, 0.0)
    assert window(g, clock, 19.0, 0.0) == 2 and "no idle-time reading" in g._trial_why


def test_idle_seconds_come_from_proc_stat_and_none_where_it_is_missing(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 1000 100 0 0 0 0 0\ncpu0 ...\n")
    import os
    assert read_idle_seconds(str(stat)) == pytest.approx(1100 / os.sysconf("SC_CLK_TCK"))
    assert read_idle_seconds(str(tmp_path / "missing")) is None
    stat.write_text("garbage\n")
    assert read_idle_seconds(str(stat)) is None


class Scripted:
    """A governor that answers a fixed list of thread counts, one per step."""

    def __init__(self, most, answers=(1, 1, 2, 1), start=None):
        self.answers, self.seen, self.threads = list(answers), [], start or most

    def observe(self, seconds, wait):
        self.seen.append(wait)
        self.threads = self.answers.pop(0) if self.answers else 1
        return self.threads

    @property
    def kept_threads(self):
        return 2  # as if the last answers were a trial down, undecided when the run ended

    def note(self):
        return "scripted"


class Calm:
    """The machine-load watch of a machine where nothing else ran (or, with `others`, where something did)."""

    def __init__(self, threads=None, why=""):
        self.threads, self.why, self.marks = threads, why, 0

    def threads_for_run(self, most):
        return (self.threads or most), self.why

    def mark(self, last_threads=None):
        self.marks += 1
        self.last_threads = last_threads


def test_a_run_started_below_its_most_threads_looks_again_after_a_few_steps():
    """The look back before a run often saw a burst that is over (the page drawing the Run click): a start on one
    thread is checked after FIRST_LOOK steps, not a whole window of them."""
    from engine.host.thread_governor import FIRST_LOOK

    clock = Clock()
    g = ThreadGovernor(2, window=8, start=1, idle_seconds=lambda: clock.idle, clock=lambda: clock.t)
    answers = []
    for _ in range(FIRST_LOOK):
        clock.advance(37 * MS, 0.8)  # a core idle most of the time: the burst is over
        answers.append(g.observe(37 * MS, 0.0))
    assert answers == [1] * (FIRST_LOOK - 1) + [2]  # a trial with two threads after FIRST_LOOK steps, not 8
    for _ in range(8):
        clock.advance(25 * MS, 0.0)
        g.observe(25 * MS, 0.0)
    assert g.threads == 2 and g.changes[-1].step == FIRST_LOOK  # kept: from step FIRST_LOOK + 1 on
    busy = Clock()
    h = ThreadGovernor(2, window=8, start=1, idle_seconds=lambda: busy.idle, clock=lambda: busy.t)
    for _ in range(FIRST_LOOK + 7):  # a core really held (no idle time): one look, then whole windows again
        busy.advance(20 * MS, 0.0)
        assert h.observe(20 * MS, 0.0) == 1
    assert h.trials == 0
    assert ThreadGovernor(2, window=8)._first is None  # a start on every thread waits for a whole window


def test_a_trial_in_progress_is_not_what_the_run_kept():
    g, clock = governor()
    assert window(g, clock, 31.0, 12.0) == 1  # waits: a trial with one thread starts
    assert (g.threads, g.kept_threads) == (1, 2)  # undecided: the run has kept two so far
    assert window(g, clock, 19.0, 0.0) == 1 and g.kept_threads == 1  # faster: kept
    g2, clock2 = governor()
    window(g2, clock2, 31.0, 12.0)
    assert window(g2, clock2, 31.0, 0.0) == 2 and g2.kept_threads == 2  # not faster: back


def test_a_run_records_each_steps_threads_and_sets_them_back(tiny_llama):
    watch = Calm()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trace = generate(tiny_llama, [1, 2, 3, 4], 6, ignore_eos=True,
                         watch=RunWatch(load_watch=watch, governor_type=Scripted))
        assert torch.get_num_threads() == 2  # the loop gives the process its threads back
        # it ended on a trial's one thread, undecided: the next run is told what was kept (two), not the trial
        assert watch.last_threads == 2
        assert [s.threads for s in trace.steps] == [2, 1, 1, 2, 1]  # each step ran with what the one before chose
        assert trace.settings["adaptive_threads"] is True and trace.threads_note == "scripted"
        check_fields(json.loads(trace.to_json()))  # the file format takes both
        fixed = generate(tiny_llama, [1, 2, 3, 4], 6, ignore_eos=True, watch=RunWatch(False, watch, Scripted))
        assert [s.threads for s in fixed.steps] == [2] * 5 and fixed.threads_note == ""
        assert fixed.settings["adaptive_threads"] is False
    finally:
        torch.set_num_threads(before)


def test_a_run_after_other_programs_kept_a_core_busy_starts_on_fewer_threads(tiny_llama, monkeypatch):
    watch = Calm(1, "other programs kept 1.0 core(s) busy since the last run")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trace = generate(tiny_llama, [1, 2, 3, 4], 4, ignore_eos=True, watch=RunWatch(load_watch=watch))
        assert torch.get_num_threads() == 2 and watch.marks == 1  # given back, and the next run looks from here
        assert trace.settings["prefill_threads"] == 1 and trace.steps[0].threads == 1
        assert trace.threads_note.startswith("prefill on 1 thread(s) (other programs kept 1.0 core(s) busy")
        fixed = generate(tiny_llama, [1, 2, 3, 4], 4, ignore_eos=True, watch=RunWatch(False, watch))
        assert fixed.settings["prefill_threads"] == 2 and watch.marks == 1
    finally:
        torch.set_num_threads(before)


def test_one_thread_has_nothing_to_adapt(tiny_llama):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trace = generate(tiny_llama, [1, 2, 3], 4, ignore_eos=True, watch=RunWatch())
        assert trace.settings["adaptive_threads"] is False and {s.threads for s in trace.steps} == {1}
    finally:
        torch.set_num_threads(before)


def test_trace_files_refuse_odd_threads_and_notes(tiny_llama):
    data = json.loads(generate(tiny_llama, [1, 2, 3], 3, ignore_eos=True).to_json())
    bad = dict(data, steps=[dict(data["steps"][0], threads=-1)] + data["steps"][1:])
    with pytest.raises(ValueError, match="threads"):
        check_fields(bad)
    with pytest.raises(ValueError, match="threads_note"):
        check_fields(dict(data, threads_note="[click](http://x)"))


def test_a_prefill_that_fails_raises_its_own_error_and_gives_the_threads_back(tiny_llama, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("prefill broke")

    monkeypatch.setattr(generate_module, "prefill", broken)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="prefill broke"):  # the timed prefill's (no warm-up before it)
            generate(tiny_llama, [1, 2, 3, 4], 4, ignore_eos=True, warmup=False, watch=RunWatch(load_watch=Calm(1, "x")))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
