"""Batch mode's steps and joins on the threads its governor chooses (a batch forming from empty starts on what other
programs left free); between steps every thread."""
import time

import pytest
import torch

import engine
from engine.host.thread_governor import ThreadGovernor
from engine.serving.scheduling.continuous_batch import Batch
from engine.serving.scheduling.work import ModelSpec, Request, result_of

GREEDY = engine.SamplingParams(ignore_eos=True)


def request(n: int, ids=(1, 2, 3, 4, 5)) -> Request:
    return Request(model=ModelSpec("tiny-llama", "cpu"), prompt_ids=list(ids), max_new_tokens=n, params=GREEDY)


class Scripted(ThreadGovernor):
    """A real governor whose decisions come from a list: one thread count per observed step."""

    def __init__(self, most, answers):
        super().__init__(most)
        self.answers, self.restarts, self.seen_threads = list(answers), 0, []

    def restart(self):
        self.restarts += 1
        return self.threads

    def observe(self, seconds, wait):
        self.seen_threads.append(torch.get_num_threads())  # the threads the step just ran with
        self._steps += 1
        self.threads = self.answers.pop(0) if self.answers else 2
        if self.threads == 1 and not self.changes:
            self.changes.append(engine.host.thread_governor.ThreadChange(self._steps, 1, "scripted"))
        return self.threads


class Watch:
    """machine_load.LoadWatch's two calls, scripted: the threads a forming batch starts on; the marks it gets."""

    def __init__(self, threads=2, why=""):
        self.answer, self.marks = (threads, why), []

    def threads_for_run(self, most):
        return self.answer

    def mark(self, last_threads=None):
        self.marks.append(last_threads)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_plain_steps_run_on_the_governors_threads_and_the_rest_on_every_thread(tiny_llama, two_threads):
    batch = Batch(tiny_llama, max_batch=4, load_watch=Watch())
    assert batch.governor is not None and batch.governor.most == 2
    batch.governor = scripted = Scripted(2, [1, 1, 1, 1, 1, 1])
    first, second = request(6), request(3, ids=(7, 8, 9))
    batch.admit(first, time.perf_counter())
    batch.step()
    batch.step()
    assert torch.get_num_threads() == 2  # between steps (a join's prefill comes here) every thread
    batch.admit(second, time.perf_counter())
    while batch.size:
        batch.step()
        assert torch.get_num_threads() == 2
    one, two = result_of(first, timeout=5), result_of(second, timeout=5)
    assert [s.threads for s in one.steps] == scripted.seen_threads[:len(one.steps)] == [2, 1, 1, 1, 1]
    assert [s.threads for s in two.steps] == [1, 1]
    # the batch forming, then one rider, two riders, one rider again: each a new amount of work per step
    assert scripted.restarts == 4
    assert one.threads_note.startswith("from step 2 on 1 thread(s) (scripted)")
    assert two.threads_note.startswith("from step 1 on 1 thread(s) (scripted)")  # in force when it joined
    assert one.settings["adaptive_threads"] is True
    assert one.settings["prefill_threads"] == 2 and two.settings["prefill_threads"] == 1  # a join: the steps' threads
    assert one.output_ids == engine.generate(tiny_llama, [1, 2, 3, 4, 5], 6, ignore_eos=True).output_ids


def test_fixed_threads_and_one_thread_have_no_governor(tiny_llama, two_threads):
    assert Batch(tiny_llama, max_batch=2, adaptive_threads=False).governor is None
    torch.set_num_threads(1)
    batch = Batch(tiny_llama, max_batch=2)
    assert batch.governor is None
    req = request(3)
    batch.admit(req, time.perf_counter())
    while batch.size:
        batch.step()
    trace = result_of(req, timeout=5)
    assert {s.threads for s in trace.steps} == {1} and trace.threads_note == ""
    assert trace.settings["adaptive_threads"] is False


def test_a_governor_restarted_by_a_join_abandons_its_trial():
    g = ThreadGovernor(2, window=2, idle_seconds=lambda: 0.0, clock=time.perf_counter)
    g.observe(0.03, 0.015)
    assert g.observe(0.03, 0.015) == 1  # a trial with one thread
    assert g.restart() == 2 and g.note() == ""  # riders changed mid-trial: back, nothing kept
    assert g.observe(0.02, 0.0) == 2 and g.observe(0.02, 0.0) == 2


def test_a_batch_forming_beside_busy_programs_starts_on_fewer_threads_and_marks_when_empty(tiny_llama, two_threads):
    busy = Watch(1, "other programs kept 1.3 core(s) busy since the last run")
    batch = Batch(tiny_llama, max_batch=2, load_watch=busy)
    batch.governor = ThreadGovernor(2, window=100)  # no window ends in this short run: the start is what counts
    req = request(4)
    batch.admit(req, time.perf_counter())
    assert torch.get_num_threads() == 2  # back to every thread between steps
    while batch.size:
        batch.step()
        assert torch.get_num_threads() == 2
    trace = result_of(req, timeout=5)
    assert trace.settings["prefill_threads"] == 1 and {s.threads for s in trace.steps} == {1}
    assert trace.threads_note == "from step 1 on 1 thread(s) (other programs kept 1.3 core(s) busy since the last run)"
    assert busy.marks == [1]  # emptied: the next batch looks at the load from here, knowing this one ended on 1


def test_chunked_joins_run_on_the_governors_threads(tiny_llama, two_threads):
    batch = Batch(tiny_llama, max_batch=2, max_num_batched_tokens=4, load_watch=Watch(1, "scripted load"))
    batch.governor = ThreadGovernor(2, window=100)
    seen = []
    model_forward = tiny_llama.model.forward

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return model_forward(*args, **kwargs)

    tiny_llama.model.forward = spy
    try:
        req = request(3, ids=tuple(range(1, 11)))  # 10 prompt tokens: three chunks of the 4-token budget
        batch.admit(req, time.perf_counter())
        while batch.size:
            batch.step()
            assert torch.get_num_threads() == 2
    finally:
        del tiny_llama.model.forward
    trace = result_of(req, timeout=5)
    assert seen and set(seen) == {1}  # every chunk and step of this batch on the one thread the watch allowed
    assert {s.threads for s in trace.steps} == {1}
    assert trace.output_ids == engine.generate(tiny_llama, list(range(1, 11)), 3, ignore_eos=True).output_ids
