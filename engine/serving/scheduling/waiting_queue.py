"""The line in front of the engine: who waits, their place and expected wait, and a full line refused with a retry hint.

Both schedulers keep their waiting work here (engine/serving/scheduling/scheduler.py and disaggregated.py), so a
request is checked, queued, told its position, cancelled while it waits and refused when the line is full in one
way, with one QueueFull whose `retry_after` is the expected wait of the place it asked for. Expected waits come from
Estimates, refined by every finished run. Not thread-safe by itself: the scheduler calls it under its own lock.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from engine.core.metrics import summarize
from engine.core.prompting import check_context, check_max_new_tokens, encode_prompt
from engine.errors import EngineError
from engine.serving.scheduling.work import Failed, Queued, QueueFull, Request, Work


class Estimates:
    """Seconds a piece of work is expected to take: a moving average over the runs that finished."""

    def __init__(self):
        self.prefill_s_per_token = 0.002
        self.tpot_s = 0.05
        self.job_s = 10.0

    def cost(self, work: Work) -> float:
        if isinstance(work, Request):
            return len(work.prompt_ids) * self.prefill_s_per_token + work.max_new_tokens * self.tpot_s
        return self.job_s

    def learn(self, trace) -> None:
        """A finished request's trace refines the per-token prefill time and the time per output token."""
        s = summarize(trace)
        if trace.n_prompt and s.ttft_s > 0:
            self.prefill_s_per_token = 0.7 * self.prefill_s_per_token + 0.3 * s.ttft_s / trace.n_prompt
        if s.tpot_s == s.tpot_s:  # not NaN (one output token has no TPOT)
            self.tpot_s = 0.7 * self.tpot_s + 0.3 * s.tpot_s

    def learn_job(self, seconds: float) -> None:
        self.job_s = 0.5 * self.job_s + 0.5 * seconds


def check_request(work: Work, max_new_tokens_cap: int) -> None:
    """A request's values checked once, at the door; what needs the model is checked when the model is at hand."""
    if isinstance(work, Request):
        check_max_new_tokens(work.max_new_tokens, max_new_tokens_cap)
        work.params.checked()


def check_with_model(req: Request, lm) -> None:
    """What the door could not check, once the model is at hand (the checks generate makes): the prompt encoded
    (its ids against the vocabulary), prompt + max_new_tokens against the context, top_k against the vocabulary."""
    req.prompt_ids = encode_prompt(lm, req.prompt_ids)
    check_context(lm, len(req.prompt_ids), req.max_new_tokens)
    req.params.checked(lm.config.vocab_size)


class WaitingQueue:
    """First come, first served, at most `max_queue` waiting; `running` is what the engine holds now."""

    def __init__(self, max_queue: int, estimates: Estimates | None = None):
        self.max_queue = max_queue
        self.estimates = estimates or Estimates()
        self._items: deque[Work] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Work]:
        return iter(self._items)

    def __contains__(self, work: object) -> bool:
        return work in self._items

    def head(self) -> Work | None:
        return self._items[0] if self._items else None

    def popleft(self) -> Work:
        return self._items.popleft()

    def remove(self, work: Work) -> None:
        self._items.remove(work)

    def expected_wait(self, position: int, running: Iterable[Work]) -> float:
        """Seconds until the work at `position` (0 = next) starts: the running work half done, then all ahead."""
        ahead = list(self._items)[:position]
        cost = self.estimates.cost
        return sum(cost(w) for w in running) / 2 + sum(cost(w) for w in ahead)

    def announce(self, running: Iterable[Work]) -> None:
        """Tell every waiting item its position and expected wait."""
        running = list(running)
        for i, work in enumerate(self._items):
            work.emit(Queued(i + 1, self.expected_wait(i, running)))

    def add(self, work: Work, running: Iterable[Work], *, stopping: bool) -> None:
        """Queue it, or refuse: EngineError once the server is stopping, QueueFull (with a retry hint) when full."""
        if stopping:
            raise EngineError("the server is shutting down; it takes no more requests")
        running = list(running)
        if len(self._items) >= self.max_queue:
            raise QueueFull(f"the queue is full ({self.max_queue} requests waiting); try again in a moment",
                            retry_after=self.expected_wait(len(self._items), running))
        self._items.append(work)
        self.announce(running)

    def cancel(self, work: Work, running: Iterable[Work]) -> bool:
        """End a waiting item as cancelled (True), or say it no longer waits (False)."""
        if work not in self._items:
            return False
        self._items.remove(work)
        work.emit(Failed("cancelled", cancelled=True))
        self.announce(running)
        return True

    def drop_cancelled(self) -> None:
        """Items cancelled while they waited at the head get their final event and leave."""
        while self._items and self._items[0].cancelled.is_set():
            self._items.popleft().emit(Failed("cancelled", cancelled=True))

    def fail_all(self, message: str) -> None:
        for work in self._items:
            work.emit(Failed(message))
        self._items.clear()
