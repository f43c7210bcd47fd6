"""Events and refusals cross the worker's process boundary by pickle: they must come back whole."""
import pickle

from engine.serving.scheduling.work import QueueFull


def test_queue_full_keeps_retry_after_through_pickle():
    back = pickle.loads(pickle.dumps(QueueFull("the queue is full", retry_after=3.5)))
    assert isinstance(back, QueueFull) and str(back) == "the queue is full" and back.retry_after == 3.5


def test_every_loop_streams_a_token_as_the_same_event(tiny_llama):
    """Queue mode's generate, the batch's step and the disaggregated valley all stream through work.token_event: the
    first token carries the prefill's seconds, each later one its own decode step."""
    import engine
    from engine.serving.scheduling.work import FirstToken, Token, token_event

    trace = engine.generate(tiny_llama, [5, 6, 7, 8], max_new_tokens=4, params=engine.SamplingParams(ignore_eos=True))
    events = [token_event(trace, i, t, "") for i, t in enumerate(trace.output_ids)]
    assert isinstance(events[0], FirstToken) and events[0].prefill_seconds == trace.prefill_seconds
    assert all(isinstance(e, Token) for e in events[1:]) and [e.step for e in events[1:]] == trace.steps
    assert [e.token_id for e in events] == trace.output_ids
