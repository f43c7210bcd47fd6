"""Batch mode's plain decode steps and whole-prefill joins on the threads its governor chooses; the rest on every one."""
import time

import pytest
import torch

import engine
from engine.core.thread_governor import ThreadGovernor
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
            self.changes.append(engine.core.thread_governor.ThreadChange(self._steps, 1, "scripted"))
        return self.threads


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_plain_steps_run_on_the_governors_threads_and_the_rest_on_every_thread(tiny_llama, two_threads):
    batch = Batch(tiny_llama, max_batch=4)
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
    assert scripted.restarts == 3  # one rider, two riders, one rider again: each a new amount of work per step
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
