"""Other programs' recent load from /proc/stat less this process's own CPU time, and the threads a run starts with."""
import pytest

from engine.host.machine_load import LoadWatch


class Machine:
    """A 2-core machine's idle CPU-seconds, this process's CPU-seconds and the clock, moved by the test."""

    def __init__(self):
        self.idle, self.own, self.t = 100.0, 5.0, 10.0

    def run(self, seconds: float, others: float, own: float = 0.0) -> None:
        """`seconds` pass with `others` cores busy elsewhere and `own` cores busy here."""
        self.t += seconds
        self.own += own * seconds
        self.idle += (2 - others - own) * seconds

    def watch(self, readable=True) -> LoadWatch:
        return LoadWatch(idle_seconds=lambda: self.idle if readable else None, own=lambda: self.own,
                         clock=lambda: self.t, cores=2)


@pytest.mark.parametrize("others, threads", [(0.0, 2), (0.3, 2), (0.6, 1), (1.0, 1), (2.0, 1)])
def test_other_programs_busy_cores_decide_the_runs_threads(others, threads):
    m = Machine()
    w = m.watch()
    m.run(2.0, others=others, own=0.5)  # this process's own work (loading, a lab) is not someone else's
    assert w.others_cores() == pytest.approx(others)
    got, why = w.threads_for_run(2)
    assert got == threads and (why == "" if threads == 2 else why.startswith(f"other programs kept {others:.1f}"))


def test_a_mark_starts_the_look_back_and_a_short_one_says_nothing():
    m = Machine()
    w = m.watch()
    m.run(5.0, others=1.0)
    w.mark()
    m.run(1.0, others=0.0)
    assert w.threads_for_run(2) == (2, "")  # the busy time before the mark no longer counts
    w.mark()
    m.run(0.05, others=2.0)
    assert w.others_cores() is None and w.threads_for_run(2) == (2, "")
    w.mark(last_threads=1)
    m.run(0.05, others=2.0)  # back to back after a run that ended on one thread: start there
    assert w.threads_for_run(2) == (1, "the run just before ended on them")


def test_only_a_run_that_ended_on_fewer_threads_lets_the_next_start_lower():
    m = Machine()
    w = m.watch()
    w.mark(last_threads=2)  # the last run decoded on both threads to its end
    m.run(1.0, others=1.0)  # then the page drew its result: a burst between runs
    assert w.threads_for_run(2) == (2, "")
    w.mark(last_threads=1)  # the last run's decode loop had moved to one thread
    m.run(1.0, others=1.0)
    assert w.threads_for_run(2)[0] == 1
    w.mark(last_threads=1)
    m.run(1.0, others=0.0)  # the other program stopped
    assert w.threads_for_run(2) == (2, "")


def test_without_proc_stat_every_thread_is_kept():
    m = Machine()
    w = m.watch(readable=False)
    m.run(1.0, others=2.0)
    assert w.others_cores() is None and w.threads_for_run(2) == (2, "")


def test_a_bigger_machine_keeps_what_the_others_left_free():
    m = Machine()
    w = LoadWatch(idle_seconds=lambda: m.idle, own=lambda: m.own, clock=lambda: m.t, cores=8)
    m.idle += 8 * 1.0 - 4.0  # one second: 4 of 8 cores busy elsewhere
    m.t += 1.0
    assert w.threads_for_run(8)[0] == 4 and w.threads_for_run(4)[0] == 4


def test_while_idle_ticks_keep_the_look_back_to_the_last_second():
    """Run pressed again soon after a run that ended on one thread: the time since it ended was mostly the page
    drawing its result, over by now. With the scheduler's ticks only the last ~second counts; a program that keeps a
    core busy is still in it."""
    m = Machine()
    w = m.watch()
    w.mark(last_threads=1)
    for _ in range(3):  # the browser draws the last result: 1.5 s with 1.5 cores busy, ticks every half second
        m.run(0.5, others=1.5)
        w.tick()
    for _ in range(3):  # then the page is idle for 1.5 s before the click
        m.run(0.5, others=0.0)
        w.tick()
    assert w.others_cores() == pytest.approx(0.0)
    assert w.threads_for_run(2) == (2, "")
    busy = m.watch()
    busy.mark(last_threads=1)
    for _ in range(6):  # a program holding a core all along: still seen
        m.run(0.5, others=1.0)
        busy.tick()
    assert busy.others_cores() == pytest.approx(1.0) and busy.threads_for_run(2)[0] == 1
    no_ticks = m.watch()  # the CLI, or a caller without a scheduler: the look back is since the mark, as before
    no_ticks.mark(last_threads=1)
    m.run(1.5, others=1.5)
    m.run(1.5, others=0.0)
    assert no_ticks.others_cores() == pytest.approx(0.75)
    w.mark(last_threads=1)  # a new mark forgets the ticks before it
    m.run(0.05, others=2.0)
    assert w.others_cores() is None
