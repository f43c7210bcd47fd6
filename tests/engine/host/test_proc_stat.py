"""Waiting for quiet cores before a timed run (engine/host/proc_stat.py), on a fake clock and a fake /proc/stat."""
import os

import pytest

from engine.host.proc_stat import read_idle_seconds, wait_for_quiet


class FakeMachine:
    """Two cores; `busy` = cores in use during each window, in order (the last one repeats)."""

    def __init__(self, busy: list[float], cores: int = 2):
        self.t, self.idle, self.busy, self.cores = 0.0, 0.0, list(busy), cores

    def clock(self) -> float:
        return self.t

    def idle_seconds(self) -> float:
        return self.idle

    def sleep(self, s: float) -> None:
        busy = self.busy[0] if len(self.busy) == 1 else self.busy.pop(0)
        self.idle += (self.cores - busy) * s
        self.t += s


def _wait(machine, first=0.5, most=3.0):
    return wait_for_quiet(first, most, idle_seconds=machine.idle_seconds, clock=machine.clock, sleep=machine.sleep,
                          cores=machine.cores)


def test_quiet_cores_send_after_the_first_wait_and_one_look():
    waited, quiet = _wait(FakeMachine([2.0, 0.1]))  # busy during the first half second, quiet after
    assert quiet is True and waited == pytest.approx(0.6)


def test_busy_cores_hold_the_request_until_they_go_quiet():
    waited, quiet = _wait(FakeMachine([2.0, 1.5, 1.2, 0.9, 0.3]))  # the browser loading, then done
    assert quiet is True and waited == pytest.approx(0.5 + 4 * 0.1)


def test_cores_that_stay_busy_send_it_at_the_most():
    waited, quiet = _wait(FakeMachine([1.0]), most=1.0)  # another program holds a core the whole time
    assert quiet is False and waited == pytest.approx(1.0)


def test_no_proc_stat_waits_the_first_part_only():
    machine = FakeMachine([0.0])
    waited, quiet = wait_for_quiet(0.5, 3.0, idle_seconds=lambda: None, clock=machine.clock, sleep=machine.sleep)
    assert quiet is None and waited == pytest.approx(0.5)


def test_read_idle_seconds_reads_idle_and_iowait(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 1000 100 0 0 0 0 0\ncpu0 ...\n")
    assert read_idle_seconds(str(stat)) == pytest.approx(1100 / os.sysconf("SC_CLK_TCK"))
    assert read_idle_seconds(str(tmp_path / "missing")) is None
