"""Continuous batching's KV cache: it grows only what is short, shrinks when the batch has become much smaller
or shorter (never on a plain step), and the tokens stay the ones each request gives alone."""
import time
from collections import deque

import pytest
import torch

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


# --- chunked prefill: a joining prompt rides along the riders' steps in chunks ------------------------------
def prompt(n: int, seed: int = 0) -> list[int]:
    return torch.randint(1, 500, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("length", [20, 21, 40, 41, 57])  # 20 = five chunks of 4 beside 4 riders; 21 straddles
def test_a_chunked_joiner_and_its_riders_give_the_tokens_they_give_alone(tiny_llama, length):
    log = deque()
    batch = Batch(tiny_llama, max_batch=8, max_num_batched_tokens=8, log=log)
    riders = [request(30, ids=prompt(6 + i, seed=i)) for i in range(4)]
    for r in riders:
        batch.admit(r, time.perf_counter())
    while any(seq.prefilling for seq in batch.seqs):
        batch.step()
    batch.step()  # every rider decodes now
    joiner = request(12, ids=prompt(length, seed=99))
    batch.admit(joiner, time.perf_counter())
    run_out(batch)
    for r in riders + [joiner]:
        assert result_of(r, timeout=5).output_ids == alone(tiny_llama, r.max_new_tokens, ids=r.prompt_ids)
    shared = [rec for rec in log if any(c[0] == joiner.id for c in rec.chunks)]
    assert [c[1:] for rec in shared for c in rec.chunks] == [(s, min(4, length - s)) for s in range(0, length, 4)]
    assert all(len(rec.decode) == 4 and rec.chunks[0][2] <= 4 for rec in shared)  # 8 - 4 riders = 4 a chunk
    assert all(len(rec.decode) + sum(c[2] for c in rec.chunks) <= 8 for rec in log)


def test_two_joiners_share_the_rest_of_the_budget_in_arrival_order(tiny_llama):
    log = deque()
    batch = Batch(tiny_llama, max_batch=4, max_num_batched_tokens=16, log=log)
    first, second = request(3, ids=prompt(10, seed=1)), request(3, ids=prompt(30, seed=2))
    batch.admit(first, time.perf_counter())
    batch.admit(second, time.perf_counter())
    batch.step()
    assert log[-1].chunks == [(first.id, 0, 10), (second.id, 0, 6)] and log[-1].decode == []
    run_out(batch)
    for r in (first, second):
        assert result_of(r, timeout=5).output_ids == alone(tiny_llama, 3, ids=r.prompt_ids)


def test_a_whole_prefill_is_logged_as_one_step_alone(tiny_llama):
    log = deque()
    batch = Batch(tiny_llama, max_batch=4, log=log)
    req = request(2)
    batch.admit(req, time.perf_counter())
    assert log[-1].chunks == [(req.id, 0, len(PROMPT))] and log[-1].decode == []


def test_a_request_cancelled_between_chunks_frees_its_row(tiny_llama):
    batch = Batch(tiny_llama, max_batch=4, max_num_batched_tokens=4)
    rider = request(20)
    batch.admit(rider, time.perf_counter())
    batch.step()  # the rider's prompt (5 tokens) needs two steps of 4
    batch.step()
    joiner = request(5, ids=prompt(40))
    batch.admit(joiner, time.perf_counter())
    batch.step()  # one chunk of 3 beside the rider's token
    assert batch.size == 2 and int(batch.cache.lengths[1]) == 3
    joiner.cancel()
    batch.cancel_marked()
    assert batch.size == 1 and int(batch.cache.lengths[1]) == 0
    with pytest.raises(engine.EngineError, match="cancelled"):
        result_of(joiner, timeout=5)
    run_out(batch)
    assert result_of(rider, timeout=5).output_ids == alone(tiny_llama, 20)


@pytest.mark.parametrize("budget", [0, -8, 7, 8.0, 2.5, "256", True])
def test_a_budget_that_cannot_hold_a_step_gets_one_clear_line(tiny_llama, budget):
    with pytest.raises(engine.EngineError, match="max_num_batched_tokens") as err:
        Batch(tiny_llama, max_batch=8, max_num_batched_tokens=budget)
    assert "\n" not in str(err.value)


class _Clockwork:
    """A fake schedstat: every read finds this process's one thread has waited 1 ms more than at the last read."""

    def __init__(self):
        self.reads = 0

    def __call__(self, tasks=None):
        self.reads += 1
        return {"1": self.reads * 1_000_000}


@pytest.mark.parametrize("budget", [None, 8])  # whole prefills, and chunked ones beside the riders
def test_each_riders_gaps_carry_their_own_cpu_wait_in_batch_mode(tiny_llama, monkeypatch, budget):
    from engine.host import cpu_wait

    monkeypatch.setattr(cpu_wait, "read_waits", _Clockwork())
    monkeypatch.setattr(cpu_wait, "missing_reason", lambda tasks=None: "")
    batch = Batch(tiny_llama, max_batch=4, max_num_batched_tokens=budget)
    first, second = request(6, ids=prompt(10, seed=1)), request(3, ids=prompt(12, seed=2))
    batch.admit(first, time.perf_counter())
    batch.step()
    batch.step()
    batch.admit(second, time.perf_counter())  # joins while the first rides: their gaps overlap
    run_out(batch)
    for req in (first, second):
        trace = result_of(req, timeout=5)
        steps = [s.cpu_wait_seconds for s in trace.steps]
        assert trace.prefill_cpu_wait_seconds > 0 and all(w > 0 for w in steps)
        # each gap counts the reads between its own start and end, so a rider's waits add up to its whole life
        assert trace.cpu_wait_seconds == pytest.approx(trace.prefill_cpu_wait_seconds + sum(steps))
        assert trace.cpu_wait_all_threads_seconds == pytest.approx(trace.cpu_wait_seconds)  # one thread
        assert trace.cpu_wait_note == "" and trace.cpu_wait_read_seconds > 0


def test_batch_mode_says_why_where_the_cpu_wait_cannot_be_read(tiny_llama, monkeypatch):
    from engine.host import cpu_wait

    monkeypatch.setattr(cpu_wait, "missing_reason", lambda tasks=None: "no schedstat here, so not measured")
    batch = Batch(tiny_llama, max_batch=2)
    req = request(3)
    batch.admit(req, time.perf_counter())
    run_out(batch)
    trace = result_of(req, timeout=5)
    assert trace.cpu_wait_seconds is None and trace.cpu_wait_note == "no schedstat here, so not measured"
    assert all(s.cpu_wait_seconds == 0 for s in trace.steps)
