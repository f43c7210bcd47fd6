"""benchmarks/loadtest.py and room_size.py read each run's numbers back from the run panel's 'Run finished' line:
the line and the pattern must stay in step (they drifted once: the CPU-wait words broke the pattern and the load test waited forever)."""

import pytest

from benchmarks._browser import FINISHED
from engine.core.trace import DecodeStep, Trace
from ui.text import run_numbers


def _trace(**fields) -> Trace:
    steps = [DecodeStep(0.015, 65 + i, 0, cpu_wait_seconds=0.002) for i in range(31)]
    return Trace(model="hand", device="cpu", dtype="float32", prompt_ids=list(range(64)), output_ids=list(range(32)),
                 prefill_seconds=0.0541, steps=steps, text="", env={}, queue_seconds=1.25, **fields)


@pytest.mark.parametrize("wait, every", [(None, None), (0.07, None), (0.07, 0.124)])  # not measured / measured /
def test_the_load_test_reads_the_run_panels_finished_line(wait, every):  # with every thread's wait added
    trace = _trace(cpu_wait_seconds=wait, prefill_cpu_wait_seconds=0.005 if wait else 0.0)
    if every is not None:
        trace.env["decode_cpu_wait_all_threads_s"] = every
    line = run_numbers.finished_label(trace)
    assert ("waited for a CPU" in line) == (wait is not None)
    assert ("every thread's wait added" in line) == (every is not None)
    m = FINISHED.search(line)
    assert m is not None, line
    assert m.groups() == ("64", "32", "54", f"{trace.total_seconds:,.2f}", "1.25")
