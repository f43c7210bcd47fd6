"""Stopping the scheduler: every submitted request gets a final event (Done or Failed), in both modes."""
import queue

import pytest

import engine
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import FINAL, Failed, ModelSpec, Request, Token, drain

TINY = ModelSpec("tiny-llama", "cpu")


class StopsTheServer(queue.Queue):
    """A request's event queue that stops the scheduler (from its own thread) when the request's 3rd token
    arrives: the moment right after a step, when the other riders have already been looked at."""

    def __init__(self, scheduler: Scheduler):
        super().__init__()
        self.scheduler, self.tokens = scheduler, 0

    def put(self, event, *args, **kwargs):
        super().put(event, *args, **kwargs)
        self.tokens += isinstance(event, Token)
        if self.tokens == 3:
            self.scheduler.stop(timeout=0)


def request(n: int) -> Request:
    return Request(model=TINY, prompt_ids=list(range(1, 6)), max_new_tokens=n, params=engine.SamplingParams(ignore_eos=True))


def final_event(work, timeout=10.0):
    try:
        return list(drain(work, timeout=timeout))[-1]
    except queue.Empty:
        pytest.fail("no final event: whoever waits on this request hangs")


@pytest.mark.parametrize("mode", ["batch", "queue"])
def test_stop_gives_every_submitted_request_a_final_event(mode):
    s = Scheduler(mode, max_batch=2)
    works = [request(200) for _ in range(3)]  # two riders (one in queue mode) and one waiting
    works[1 if mode == "batch" else 0].events = StopsTheServer(s)
    for w in works:
        s.submit(w)
    s.start()
    finals = [final_event(w) for w in works]
    assert all(isinstance(e, FINAL) for e in finals)
    assert all(isinstance(e, Failed) for e in finals)  # nobody got to 200 tokens
    s.stop()


def test_a_request_submitted_after_stop_is_refused():
    s = Scheduler("batch").start()
    s.stop()
    with pytest.raises(engine.EngineError, match="shutting down"):
        s.submit(request(4))
