"""A request's values are checked once: at submit what needs no model, on the scheduler's thread what does."""
import pytest

import engine
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import ModelSpec, Request, drain

TINY = ModelSpec("tiny-llama", "cpu")


def request(n, ids=range(1, 6)) -> Request:
    return Request(model=TINY, prompt_ids=list(ids), max_new_tokens=n, params=engine.SamplingParams(ignore_eos=True))


@pytest.mark.parametrize("n, message", [("12", "whole number"), (0, "at least 1"), (True, "whole number"),
                                        (51, "at most 50 new tokens")])
def test_submit_refuses_a_bad_max_new_tokens_at_once(n, message):
    s = Scheduler("batch", max_new_tokens_cap=50)  # not started: the check needs no thread and no model
    with pytest.raises(engine.EngineError, match=message):
        s.submit(request(n))
    assert s.n_waiting == 0


@pytest.mark.parametrize("mode", ["batch", "queue"])
def test_what_needs_the_model_fails_the_request_with_a_clear_message(mode):
    s = Scheduler(mode).start()
    try:
        too_long = s.submit(request(50, ids=range(1, 220)))  # tiny-llama holds 256 tokens
        outside = s.submit(request(4, ids=[99999]))
        assert "max_new_tokens can be at most 37" in list(drain(too_long, timeout=60))[-1].message
        assert "outside the vocabulary" in list(drain(outside, timeout=60))[-1].message
    finally:
        s.stop()
