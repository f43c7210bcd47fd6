"""The scheduler on tiny models: ragged batches compute what single sequences compute, requests join and leave
at step boundaries, cancelling frees a slot, queue positions and limits, one failure never stops the others."""
import time

import pytest
import torch

import engine
from engine.core.kv_cache import KVCache
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import (
    Done,
    Failed,
    FirstToken,
    Job,
    ModelSpec,
    Progress,
    Queued,
    QueueFull,
    Request,
    Started,
    Token,
    drain,
    result_of,
)
from engine.serving.scheduling.worker import ProcessService, ServiceOptions

TINY = ModelSpec("tiny-llama", "cpu")
GREEDY = engine.SamplingParams(ignore_eos=True)


def request(ids, n, **kw) -> Request:
    return Request(model=kw.pop("model", TINY), prompt_ids=list(ids), max_new_tokens=n, params=kw.pop("params", GREEDY), **kw)


@pytest.fixture
def scheduler_of():
    made = []

    def make(mode="batch", **kw) -> Scheduler:
        s = Scheduler(mode, **kw).start()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_ragged_batch_logits_equal_single_sequence_logits(name):
    lm = engine.load_model(name, device="cpu")
    torch.manual_seed(0)
    prompts = [torch.randint(0, lm.config.vocab_size, (1, t)) for t in (3, 9, 5)]  # different lengths
    batch = KVCache(lm.config, 3, 20, lm.dtype)
    singles = [KVCache(lm.config, 1, 20, lm.dtype) for _ in prompts]
    with torch.inference_mode():
        tokens = []
        for row, (ids, single) in enumerate(zip(prompts, singles)):
            got = lm.model(ids, batch.rows(row, row + 1))[0]  # prefill alone into its row
            want = lm.model(ids, single)[0]
            torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
            tokens.append(int(want.argmax()))
        for _ in range(6):  # decode steps: all three rows at their own positions in one pass
            step = lm.model(torch.tensor(tokens).view(3, 1), batch)[0]  # (3, V)
            for row, single in enumerate(singles):
                want = lm.model(torch.tensor([[tokens[row]]]), single)[0]
                torch.testing.assert_close(step[row:row + 1], want, atol=1e-4, rtol=0)
            tokens = step.argmax(-1).tolist()
    assert list(batch.lengths) == [3 + 6, 9 + 6, 5 + 6]


def test_batched_requests_of_different_lengths_give_the_tokens_they_give_alone(scheduler_of, tiny_llama):
    tok = tiny_llama.tokenizer
    prompts = [tok.encode(t) for t in ("the wide valley", "one plank at a time over the gorge", "decode")]
    lengths = [12, 5, 9]
    alone = [engine.generate(tiny_llama, p, n, ignore_eos=True).output_ids for p, n in zip(prompts, lengths)]
    for mode in ("queue", "batch"):
        s = scheduler_of(mode)
        reqs = [s.submit(request(p, n)) for p, n in zip(prompts, lengths)]
        traces = [result_of(r, timeout=60) for r in reqs]
        assert [t.output_ids for t in traces] == alone, mode
        riders = [max(st.riders for st in t.steps) for t in traces]
        assert (max(riders) > 1) if mode == "batch" else riders == [1, 1, 1]
        assert all(t.queue_seconds >= 0 and t.prefill_seconds > 0 for t in traces)


def test_a_request_joins_at_a_step_boundary_and_leaves_when_done(scheduler_of):
    s = scheduler_of("batch")
    long = s.submit(request(range(1, 9), 40))
    seen = 0
    for event in drain(long, timeout=60):  # let the long one decode alone for a few steps
        seen += isinstance(event, Token)
        if seen == 3:
            break
    short = s.submit(request(range(20, 26), 4))
    short_trace = result_of(short, timeout=60)
    long_trace = result_of(long, timeout=60)
    riders = [st.riders for st in long_trace.steps]
    assert riders[0] == 1  # alone at first
    assert 2 in riders  # then shared with the short request...
    assert riders[-1] == 1  # ...which left as soon as it ended
    assert sum(st.stall_seconds > 0 for st in long_trace.steps) >= 1  # the short one's prefill ran in between
    assert short_trace.n_output == 4 and max(st.riders for st in short_trace.steps) == 2


def test_cancel_frees_the_slot_and_the_queue_moves_on(scheduler_of):
    s = scheduler_of("batch", max_batch=1)
    first = s.submit(request(range(1, 6), 200))
    second = s.submit(request(range(1, 6), 3))
    for event in drain(first, timeout=60):
        if isinstance(event, Token):
            break
    s.cancel(first)
    events = list(drain(first, timeout=60))
    assert isinstance(events[-1], Failed) and events[-1].cancelled
    assert isinstance(list(drain(second, timeout=60))[-1], Done)  # the slot went to the waiting request


def test_queue_reports_positions_and_keeps_queue_time_out_of_ttft(scheduler_of):
    s = scheduler_of("queue")
    reqs = [s.submit(request(range(1, 30), 20)) for _ in range(3)]
    last = list(drain(reqs[2], timeout=60))
    positions = [e.position for e in last if isinstance(e, Queued)]
    assert positions[0] == 3 and min(positions) == 1  # it moved up as the others ran
    assert all(e.expected_wait_s >= 0 for e in last if isinstance(e, Queued))
    trace = last[-1].result
    first_token_at = next(i for i, e in enumerate(last) if isinstance(e, FirstToken))
    assert isinstance(last[first_token_at - 1], Started)
    assert trace.queue_seconds > trace.prefill_seconds  # it waited for two whole runs, and TTFT does not include that


def test_limits_give_clear_messages(scheduler_of):
    s = scheduler_of("queue", max_queue=1, max_new_tokens_cap=50)
    with pytest.raises(engine.EngineError, match="at most 50 new tokens"):
        s.submit(request(range(1, 5), 51))
    running = s.submit(request(range(1, 5), 50))
    next(e for e in drain(running, timeout=60) if isinstance(e, Started))
    s.submit(request(range(1, 5), 50))  # waits: the queue (1 place) is now full
    with pytest.raises(QueueFull, match=r"queue is full \(1 requests waiting\)") as refused:
        s.submit(request(range(1, 5), 50))
    assert refused.value.retry_after > 0


def test_one_failing_request_fails_alone(scheduler_of):
    s = scheduler_of("batch")
    bad = s.submit(request([99999], 4))  # outside the tiny vocabulary
    job = s.submit(Job(model=TINY, name="sweeps.batch_sizes", args=([],)))
    good = s.submit(request(range(1, 6), 4))
    assert "outside the vocabulary" in list(drain(bad, timeout=60))[-1].message
    assert "at least one batch size" in list(drain(job, timeout=60))[-1].message
    assert result_of(good, timeout=60).n_output == 4
    refused = s.submit(Job(model=TINY, name="os:system", args=("true",)))
    assert "not a lab measurement" in list(drain(refused, timeout=60))[-1].message


def test_eos_ends_one_sequence_of_a_batch_not_the_others(scheduler_of, tiny_llama):
    eos = tiny_llama.config.eos_token_ids[0]
    s = scheduler_of("batch")
    forced = s.submit(request(range(1, 6), 8, params=engine.SamplingParams()))  # stops at EOS if it comes
    other = s.submit(request(range(1, 6), 8))
    t1, t2 = result_of(forced, timeout=60), result_of(other, timeout=60)
    assert t2.n_output == 8
    assert t1.stop_reason in ("eos", "length") and (eos not in t1.output_ids[:-1])


def test_process_worker_serves_and_survives_a_bad_request():
    service = ProcessService(ServiceOptions(mode="batch", preload=TINY))
    try:
        bad = service.submit(request([99999], 3))
        good = service.submit(request(range(1, 6), 5, capture_attention=True))
        assert "outside the vocabulary" in list(drain(bad, timeout=120))[-1].message
        trace = result_of(good, timeout=120)
        assert trace.n_output == 5 and trace.attention is not None
        assert service.status()["mode"] == "batch"
        start = time.perf_counter()
        service.cancel(service.submit(request(range(1, 6), 200)))
        assert time.perf_counter() - start < 30
    finally:
        service.close()


def test_the_operators_threads_apply_in_thread_mode_too():
    from engine.serving.scheduling.worker import LocalService

    before = torch.get_num_threads()
    try:
        LocalService(ServiceOptions(threads=1)).close()
        assert torch.get_num_threads() == 1  # dashboard --model-threads with TWO_BENDS_WORKER=thread
    finally:
        torch.set_num_threads(before)
    with pytest.raises(engine.EngineError, match=r"threads must be 0 \(every core\) or more \(got -1\)"):
        LocalService(ServiceOptions(threads=-1))


def test_cancel_reaches_a_running_lab_measurement():
    scheduler = Scheduler("queue").start()
    try:
        job = scheduler.submit(Job(model=ModelSpec("tiny-llama", "cpu"), name="remedies.kv_cache",
                                   args=("the valley and the bridge", 60)))
        start = time.perf_counter()
        for event in drain(job, timeout=60):
            if isinstance(event, Progress):
                scheduler.cancel(job)  # what the lab's Cancel button does
                break
        final = list(drain(job, timeout=60))[-1]
        assert isinstance(final, Failed) and final.cancelled
        assert time.perf_counter() - start < 30
    finally:
        scheduler.stop()


def test_chunked_prefill_serves_the_tokens_each_request_gives_alone_and_logs_its_steps(scheduler_of, tiny_llama):
    s = scheduler_of("batch", max_batch=4, max_num_batched_tokens=8)
    prompts = [list(range(1, 40)), list(range(5, 12)), list(range(50, 75))]
    reqs = [s.submit(request(ids, 6)) for ids in prompts]
    for req, ids in zip(reqs, prompts):
        trace = result_of(req, timeout=30)
        assert trace.output_ids == engine.generate(tiny_llama, ids, 6, ignore_eos=True, warmup=False).output_ids
        assert trace.settings["max_num_batched_tokens"] == 8 and trace.prefill_seconds > 0
    chunks = [c for rec in s.step_log for c in rec.chunks]
    assert sum(c[2] for c in chunks) == sum(map(len, prompts)) and max(c[2] for c in chunks) <= 8
    assert all(len(rec.decode) + sum(c[2] for c in rec.chunks) <= 8 for rec in s.step_log)


@pytest.mark.parametrize("budget", [0, -1, 3, 12.5])
def test_a_token_budget_that_cannot_hold_a_step_is_refused_at_start(budget):
    with pytest.raises(engine.EngineError, match="max_num_batched_tokens") as err:
        Scheduler("batch", max_batch=4, max_num_batched_tokens=budget)
    assert "\n" not in str(err.value)


def test_the_services_options_carry_the_token_budget():
    from engine.serving.scheduling.worker import LocalService
    service = LocalService(ServiceOptions(mode="batch", max_num_batched_tokens=64))
    try:
        assert service.scheduler.max_num_batched_tokens == 64
    finally:
        service.close()
