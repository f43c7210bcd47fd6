"""Events and refusals cross the worker's process boundary by pickle: they must come back whole."""
import pickle

from engine.serving.scheduling.work import QueueFull


def test_queue_full_keeps_retry_after_through_pickle():
    back = pickle.loads(pickle.dumps(QueueFull("the queue is full", retry_after=3.5)))
    assert isinstance(back, QueueFull) and str(back) == "the queue is full" and back.retry_after == 3.5
