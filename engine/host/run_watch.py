"""One generate() run watched from outside the core: its CPU wait, and (adaptive) its threads.

engine/core/generate.py calls these methods around its timed intervals (its `RunWatch` protocol): the run's
prefill starts on the threads other programs left free (machine_load.py), its decode loop changes them as
thread_governor.py measures, and the run's trace gets the CPU wait of each interval (cpu_wait.py) and a note on
every thread change. The CLI, the scheduler and the labs pass one (a lab that times its own prefill and decode
loop calls the same methods, engine/labs/timed_request.py); a run without one measures nothing and steers nothing.
"""
from __future__ import annotations

import torch

from engine.host.cpu_wait import DECODE_ALL_THREADS, CpuWaitMeter
from engine.host.machine_load import WATCH, LoadWatch
from engine.host.thread_governor import ThreadGovernor, use_threads


class RunWatch:
    """For ONE run: `begin` ... `end` (always), then `record` on a finished trace."""

    def __init__(self, adaptive_threads: bool = True, load_watch: LoadWatch = WATCH, governor_type=ThreadGovernor):
        self.adaptive_threads = adaptive_threads  # False: the threads stay as they are (the CLI's --fixed-threads)
        self.load_watch, self.governor_type = load_watch, governor_type
        self.meter = CpuWaitMeter()  # the time this process's threads waited for a CPU, per timed interval
        self.last_wait = 0.0
        self.prefill_all_threads = 0.0  # prefill's wait, every thread's added (the decode's is the total less this)
        self.governor: ThreadGovernor | None = None
        self.most = self.threads = torch.get_num_threads()
        self.why = ""

    def begin(self, trace, device: torch.device) -> None:
        """Before the first timed interval; `trace` None for a lab's timed loop that keeps no Trace (engine/labs)."""
        settings = trace.settings if trace is not None else {}
        self.most = torch.get_num_threads()
        self.adaptive_threads = self.adaptive_threads and device.type == "cpu" and self.most > 1
        settings["adaptive_threads"] = self.adaptive_threads
        if device.type == "cpu":
            settings["prefill_threads"] = self.most
        if self.adaptive_threads:  # other programs' recent load decides the prefill's threads
            self.threads, self.why = self.load_watch.threads_for_run(self.most)
            settings["prefill_threads"] = self.threads
        use_threads(self.threads)

    def mark(self) -> None:
        self.meter.mark()

    def lap(self) -> float:
        self.last_wait = self.meter.lap().longest
        return self.last_wait

    def after_prefill(self) -> None:
        self.prefill_all_threads = self.meter.last.threads
        if self.adaptive_threads and self.meter.available:
            self.governor = self.governor_type(self.most, start=self.threads)

    def after_step(self, seconds: float, wait: float) -> None:
        if self.governor is not None:
            use_threads(self.governor.observe(seconds, wait))

    def end(self) -> None:
        use_threads(self.most)
        if self.adaptive_threads:  # the next run looks at other programs' load from here
            self.load_watch.mark(self.governor.kept_threads if self.governor is not None else self.threads)

    def record(self, trace) -> None:
        """The run's CPU wait into its trace (totals, or why it was not measured; what measuring cost) and the
        thread changes' note."""
        meter = self.meter
        trace.cpu_wait_read_seconds = meter.read_seconds
        if meter.available:
            trace.cpu_wait_seconds, trace.cpu_wait_all_threads_seconds = meter.total.longest, meter.total.threads
            # the decode steps' wait with every thread's added: while one thread waits for a CPU its partner spins at
            # the next barrier (on a CPU, so not counted as waiting), and a step loses between the longest-waiting
            # thread's wait and this (benchmarks/step_cpu.py; docs/decisions/cpu-wait.md)
            trace.env[DECODE_ALL_THREADS] = max(meter.total.threads - self.prefill_all_threads, 0.0)
        else:
            trace.cpu_wait_note = meter.reason
        notes = [f"prefill on {self.threads} thread(s) ({self.why})" if self.threads < self.most else "",
                 self.governor.note() if self.governor is not None else ""]
        trace.threads_note = "; ".join(note for note in notes if note)
