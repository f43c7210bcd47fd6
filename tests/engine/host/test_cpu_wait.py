"""The CPU-wait meter: schedstat parsed from a fake /proc, a missing schedstat stated, a run's wait in its Trace."""
import os

import pytest

import engine
from engine.host import cpu_wait
from engine.host.cpu_wait import CpuWaitMeter, parse_schedstat, read_waits, wait_between
from engine.host.run_watch import RunWatch


def fake_proc(root, waits: dict[str, int]) -> str:
    """A /proc/self/task look-alike: one folder per thread id holding 'on-CPU ns, waiting ns, slices'."""
    tasks = root / "task"
    for tid, ns in waits.items():
        (tasks / tid).mkdir(parents=True, exist_ok=True)
        (tasks / tid / "schedstat").write_text(f"123456789 {ns} 42\n")
    return str(tasks)


def test_the_second_field_is_the_wait():
    assert parse_schedstat("31810080 18939731 128\n") == 18939731
    with pytest.raises(ValueError, match="three whole numbers"):
        parse_schedstat("garbage")


def test_reads_every_thread_of_a_fake_proc(tmp_path):
    tasks = fake_proc(tmp_path, {"100": 5_000_000, "101": 1_000_000})
    assert read_waits(tasks) == {"100": 5_000_000, "101": 1_000_000}


def test_an_interval_counts_the_longest_waiting_thread_and_all_together():
    wait = wait_between({"1": 1_000_000, "2": 0}, {"1": 4_000_000, "2": 2_000_000, "3": 500_000})  # 3: born since
    assert wait.longest == pytest.approx(0.003) and wait.threads == pytest.approx(0.0055)


def test_the_meter_laps_and_adds_up_what_the_fake_proc_says(tmp_path):
    tasks = fake_proc(tmp_path, {"7": 0, "8": 0})
    meter = CpuWaitMeter(tasks)
    assert meter.available and meter.reason == ""
    meter.mark()
    fake_proc(tmp_path, {"7": 24_000_000, "8": 10_000_000})  # the browser drew: 24 ms without a CPU
    assert meter.lap().longest == pytest.approx(0.024)
    meter.mark()
    fake_proc(tmp_path, {"7": 30_000_000, "8": 10_000_000})
    meter.lap()
    assert meter.total.longest == pytest.approx(0.030) and meter.total.threads == pytest.approx(0.040)
    assert meter.reads == 4 and meter.read_seconds > 0


def test_missing_schedstat_falls_back_with_a_stated_reason(tmp_path):
    meter = CpuWaitMeter(str(tmp_path / "no-such-proc"))
    assert not meter.available and "macOS" in meter.reason and "not measured" in meter.reason
    meter.mark()
    assert meter.lap().longest == 0.0 and meter.reads == 0


def test_unreadable_schedstat_says_why(tmp_path):
    tasks = fake_proc(tmp_path, {"9": 1})
    (tmp_path / "task" / "9" / "schedstat").write_text("not numbers")
    meter = CpuWaitMeter(tasks)
    assert not meter.available and "schedstat" in meter.reason and "'" not in meter.reason.split("(")[0]


def test_a_run_records_its_wait_per_step_and_in_total(tiny_llama):
    trace = engine.generate(tiny_llama, "The valley and the bridge", 6, ignore_eos=True, watch=RunWatch())
    if not os.path.isdir(cpu_wait.TASKS):
        pytest.skip("no /proc on this system")
    assert trace.cpu_wait_note == "" and trace.cpu_wait_seconds is not None
    assert trace.cpu_wait_seconds == pytest.approx(trace.prefill_cpu_wait_seconds + trace.decode_cpu_wait_seconds)
    assert trace.cpu_wait_all_threads_seconds >= trace.cpu_wait_seconds
    assert trace.cpu_wait_read_seconds > 0  # measured: what the reads cost, outside the timed intervals


def test_a_run_without_schedstat_says_so(tiny_llama, monkeypatch):
    monkeypatch.setattr(cpu_wait, "TASKS", "/nonexistent/task")
    trace = engine.generate(tiny_llama, "The valley and the bridge", 4, ignore_eos=True, watch=RunWatch())
    assert trace.cpu_wait_seconds is None and "not measured" in trace.cpu_wait_note
    assert all(s.cpu_wait_seconds == 0.0 for s in trace.steps)


def test_a_run_without_a_watch_measures_nothing_and_leaves_the_threads_alone(tiny_llama):
    """The core neither measures nor steers the machine: only a caller's watch does (engine/host/run_watch.py)."""
    trace = engine.generate(tiny_llama, "The valley and the bridge", 4, ignore_eos=True)
    assert trace.cpu_wait_seconds is None and trace.cpu_wait_note == "" and not trace.settings["adaptive_threads"]
    assert "prefill_threads" not in trace.settings and trace.threads_note == ""


def test_the_files_stay_open_between_reads_see_new_values_and_close_when_their_thread_ends(tmp_path):
    from engine.host import cpu_wait

    tasks = tmp_path / "task"
    fake_proc(tmp_path, {"1": 100, "2": 200})
    assert read_waits(str(tasks)) == {"1": 100, "2": 200}
    (tasks / "1" / "schedstat").write_text("5 150 1\n")  # the same file, a new value: read again, not cached
    (tasks / "2" / "schedstat").unlink()
    (tasks / "2").rmdir()  # thread 2 ended
    assert read_waits(str(tasks)) == {"1": 150}
    assert list(cpu_wait._OPEN.fds) == [str(tasks / "1" / "schedstat")]
    assert read_waits() and all(p.startswith(cpu_wait.TASKS) for p in cpu_wait._OPEN.fds)  # another folder: reopened


def test_a_run_keeps_its_decode_steps_wait_with_every_threads_added(tmp_path):
    """While one thread waits for a CPU, its partner spins at the next barrier: a step loses between the longest
    wait and every thread's added, so the trace keeps the decode's share of the second as well (prefill's left out)."""
    import types

    import torch

    from engine.host.cpu_wait import DECODE_ALL_THREADS

    tasks = fake_proc(tmp_path, {"7": 0, "8": 0})
    watch = RunWatch(adaptive_threads=False)
    watch.meter = CpuWaitMeter(tasks)
    trace = types.SimpleNamespace(settings={}, env={})
    watch.begin(trace, torch.device("cpu"))
    watch.mark()
    fake_proc(tmp_path, {"7": 5_000_000, "8": 5_000_000})  # prefill: 10 ms in all
    watch.lap()
    watch.after_prefill()
    for t7, t8 in ((9_000_000, 12_000_000), (15_000_000, 14_000_000)):  # two steps: each thread waited apart
        watch.mark()
        fake_proc(tmp_path, {"7": t7, "8": t8})
        watch.lap()
    watch.end()
    watch.record(trace)
    assert trace.cpu_wait_seconds == pytest.approx(0.005 + 0.007 + 0.006)  # the longest of each interval
    assert trace.env[DECODE_ALL_THREADS] == pytest.approx(0.029 - 0.010)  # every thread's, decode only
