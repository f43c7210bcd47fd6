"""The one waiting line both schedulers keep: the same positions, expected waits and retry hint behind either."""
import pytest

from engine.serving.scheduling.disaggregated import DisaggregatedScheduler
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Failed, Queued, QueueFull, Request


def request(n_prompt, n_new):
    return Request(prompt_ids=list(range(1, n_prompt + 1)), max_new_tokens=n_new)


def events(work):
    out = []
    while not work.events.empty():
        out.append(work.events.get_nowait())
    return out


def line_of(scheduler):
    """Two requests wait (the scheduler's thread is never started, so nothing runs); the third is refused."""
    waiting = [scheduler.submit(request(100, 20)), scheduler.submit(request(50, 10))]
    with pytest.raises(QueueFull, match=r"queue is full \(2 requests waiting\)") as refused:
        scheduler.submit(request(10, 5))
    queued = [[e for e in events(w) if isinstance(e, Queued)][-1] for w in waiting]
    return refused.value.retry_after, [(e.position, e.expected_wait_s) for e in queued]


def test_both_schedulers_give_the_same_retry_hint_and_expected_waits():
    colocated = line_of(Scheduler("queue", max_queue=2))
    disaggregated = line_of(DisaggregatedScheduler(max_queue=2))
    assert disaggregated == colocated
    retry_after, queued = colocated
    assert queued[0] == (1, 0.0) and queued[1][0] == 2 and 0 < queued[1][1] < retry_after  # the wait grows down the line


def test_cancel_while_waiting_ends_it_and_moves_the_line_up():
    s = DisaggregatedScheduler(max_queue=4)
    first, second = s.submit(request(10, 5)), s.submit(request(10, 5))
    events(second)
    s.cancel(first)
    assert isinstance(events(first)[-1], Failed) and s.n_waiting == 1
    assert [e.position for e in events(second) if isinstance(e, Queued)] == [1]
