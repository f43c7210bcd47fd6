"""Continuous batching's KV cache: it grows only what is short, shrinks when the batch has become much smaller
or shorter (never on a plain step), and the tokens stay the ones each request gives alone."""
import time

import pytest

import engine
from engine.serving.scheduling.continuous_batch import Batch
from engine.serving.scheduling.work import ModelSpec, Request, result_of

GREEDY = engine.SamplingParams(ignore_eos=True)
PROMPT = list(range(1, 6))


def request(n: int, ids=PROMPT) -> Request:
    return Request(model=ModelSpec("tiny-llama", "cpu"), prompt_ids=list(ids), max_new_tokens=n, params=GREEDY)


def alone(lm, n: int, ids=PROMPT) -> list[int]:
    return engine.generate(lm, list(ids), n, ignore_eos=True, warmup=False).output_ids


def run_out(batch: Batch) -> None:
    while batch.size:
        batch.step()


def test_a_longer_request_grows_the_length_not_the_rows(tiny_llama):
    batch = Batch(tiny_llama, max_batch=8)
    batch.admit(request(4), time.perf_counter())
    rows = batch.cache.batch
    batch.admit(request(100), time.perf_counter())  # a free row exists; only the length is short
    assert batch.cache.batch == rows
    assert batch.cache.max_len >= len(PROMPT) + 100


def test_more_riders_grow_the_rows_not_the_length(tiny_llama):
    batch = Batch(tiny_llama, max_batch=8)
    batch.admit(request(40), time.perf_counter())
    length = batch.cache.max_len
    for _ in range(batch.cache.batch):  # one more than fits
        batch.admit(request(4), time.perf_counter())
    assert batch.size > 2 and batch.cache.max_len == length


def test_the_cache_shrinks_when_few_riders_are_left_and_the_tokens_stay_right(tiny_llama):
    batch = Batch(tiny_llama, max_batch=8)
    long = request(30)
    batch.admit(long, time.perf_counter())
    for _ in range(7):
        batch.admit(request(3), time.perf_counter())
    assert batch.cache.batch == 8
    batch.step()
    batch.step()  # the seven short ones end: one rider in eight rows
    assert batch.size == 1 and batch.cache.batch < 8
    kept = batch.cache
    batch.step()
    assert batch.cache is kept  # a plain step never copies the cache
    run_out(batch)
    assert result_of(long, timeout=5).output_ids == alone(tiny_llama, 30)


def test_the_cache_shortens_when_the_long_request_leaves(tiny_llama):
    batch = Batch(tiny_llama, max_batch=8)
    long, short = request(200), request(20)
    batch.admit(long, time.perf_counter())
    batch.admit(short, time.perf_counter())
    batch.step()
    long.cancel()
    batch.cancel_marked()
    assert batch.cache.max_len < (len(PROMPT) + 200) / 4
    run_out(batch)
    assert result_of(short, timeout=5).output_ids == alone(tiny_llama, 20)
    with pytest.raises(engine.EngineError, match="cancelled"):
        result_of(long, timeout=5)


def test_cancelling_a_rider_between_steps_moves_the_last_row_into_its_place(tiny_llama):
    batch = Batch(tiny_llama, max_batch=4)
    first, second = request(10), request(10, ids=range(7, 14))
    batch.admit(first, time.perf_counter())
    batch.admit(second, time.perf_counter())
    batch.step()
    first.cancel()
    batch.cancel_marked()  # outside any inference_mode, as the scheduler's loop calls it
    assert batch.size == 1
    run_out(batch)
    assert result_of(second, timeout=5).output_ids == alone(tiny_llama, 10, ids=range(7, 14))
