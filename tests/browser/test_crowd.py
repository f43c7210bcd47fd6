"""A small class measured end to end, in real Chromium: the README's room command in continuous-batching mode
(`two-bends dashboard --room --mode batch`, the tiny model), a teacher who opens a poll and four students who join
with the code a moment apart, press Run within about a second of each other (so their runs can meet in the engine's batch)
and answer the poll (benchmarks/room_size.py's class, at a size that fits the suite; the benchmark measures the
machine's room size with the real model, in both modes). Queue mode's sessions: test_run_every_page.py, test_room_class.py.

Every student joins, every run finishes and shows its numbers, every answer lands, no page shows an exception, and
the server's own CPU (read from /proc) is there to be counted. A tab that went blank (Streamlit's "Bad delta path
index") is reloaded by the harness and counted: the test warns with the count rather than failing, as the room tests
do, since Streamlit's frontend decides it; the benchmark counts such a room as not held."""
import warnings

from tests import ROOT
from tests.browser import appdriver


def test_four_students_join_run_together_and_answer_in_batch_mode():
    appdriver.need_browser()
    from benchmarks import room_size

    args = room_size.defaults(join_over=4.0, idle=1.0, run_over=1.0, timeout=120.0, model="tiny-llama",
                              browser=appdriver.browser_under_test())  # the headless shell, as every browser test
    log = ROOT / "artifacts" / "streamlit-crowd.log"
    log.parent.mkdir(exist_ok=True)
    room = room_size.crowd("batch", 4, args, log)

    for s in room.students:
        assert s.failure is None, (s.index, s.failure, log.read_text()[-1500:])
        assert s.join_s is not None and s.wall_s is not None and s.answered, s
        assert s.ttft_ms is not None and s.ttft_ms > 0 and s.tpot_ms is not None and s.tpot_ms > 0, s
        assert s.queue_s is not None and s.queue_s >= 0, s
        assert not s.exceptions, (s.index, s.exceptions)
    streamlit_cpu, worker_cpu = room.active_cpu
    assert streamlit_cpu > 0 and worker_cpu > 0, room.active_cpu  # each process read on its own
    summary = room.summary()
    assert summary["runs_finished"] == 4 and summary["exceptions"] == 0
    if summary["blank_tabs"] or summary["crashes"]:
        warnings.warn(f"Streamlit's frontend crashed {summary['crashes']} time(s); {summary['blank_tabs']} blank tab(s) "
                      "reloaded by the harness (the others by the tab's own watch)", stacklevel=1)
