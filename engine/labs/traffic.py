"""Traffic lab: one arrival sequence replayed against each scheduling policy, TTFT/ITL per request and who shared each step.

A Workload (engine/perfmodel/workload.py) becomes one fixed list of arrivals (same seed: the same requests at
the same moments for every policy). Each policy gets a fresh Scheduler of its own in this process, fed in real
time; every event is stamped on the scheduler's thread the moment it is emitted, so the numbers are the
engine's, not a busy consumer's. From those stamps: TTFT (arrival -> first token, queueing included, as vLLM's
benchmark counts it), the gaps between tokens (ITL), an Outcome per request for goodput (DistServe), and the
step timeline (engine/labs/traffic_steps.py): which riders and which prefill chunks shared each step.
Policies plug in by name: queue, continuous batching, chunked prefill (Sarathi-Serve, vLLM's
--max-num-batched-tokens) and disaggregated prefill/decode (DistServe, Splitwise: two worker processes started
for the policy, stopped and their shared memory swept when it ends, is cancelled or fails).
"""
from __future__ import annotations

import queue
import random
import time
from dataclasses import dataclass, field

from engine.core.sampling_params import SamplingParams
from engine.errors import EngineError
from engine.labs.traffic_steps import HandoverRun, StepRun, from_events, from_step_log, from_timeline
from engine.perfmodel.goodput import Outcome
from engine.perfmodel.workload import Arrival, Workload, arrivals
from engine.serving.scheduling.disaggregated import DisaggregatedScheduler
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Done, Failed, FirstToken, ModelSpec, Request, Started, Token

POLICIES = {  # name -> (label, how to build its Scheduler: mode and extra arguments)
    "queue": ("queue (one at a time)", dict(mode="queue")),
    "batch": ("continuous batching", dict(mode="batch")),
    "chunked": ("+ chunked prefill", dict(mode="batch", max_num_batched_tokens=None)),  # None: the run's token budget
    "disaggregated": ("disaggregated prefill/decode", dict(mode="disaggregated")),
}
MAX_REQUESTS = 256
TELL_EVERY_S = 0.5  # progress (and a chance to cancel) at least this often while a policy runs
IDLE_LIMIT_S = 300.0  # no event for this long while requests are in flight: the engine is stuck
NOT_YET = "not in this engine yet"


@dataclass
class RequestRun:
    """One request as the engine served it; times in seconds from the workload's start."""
    index: int
    arrived_s: float
    prompt_tokens: int
    output_tokens: int  # asked for (ignore_eos: all of them come unless it failed)
    started_s: float | None = None  # the engine took it (queueing ends)
    first_s: float | None = None  # its first token was out
    token_s: list[float] = field(default_factory=list)  # each token's time, the first included
    error: str = ""

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_s is None else self.first_s - self.arrived_s

    @property
    def itl_s(self) -> list[float]:
        return [b - a for a, b in zip(self.token_s, self.token_s[1:])]

    def outcome(self) -> Outcome:
        gaps = self.itl_s
        ok = not self.error and self.first_s is not None
        end = self.token_s[-1] if self.token_s else (self.started_s or self.arrived_s)
        return Outcome(self.arrived_s, self.ttft_s if ok else None, sum(gaps) / len(gaps) if ok and gaps else None,
                       end, len(self.token_s))


@dataclass
class PolicyRun:
    policy: str
    label: str
    available: bool = True
    note: str = ""  # why it did not run (not in this engine yet), or that it was cancelled
    requests: list[RequestRun] = field(default_factory=list)
    steps: list[StepRun] = field(default_factory=list)
    handovers: list[HandoverRun] = field(default_factory=list)  # disaggregated: one KV cart per request that crossed

    def outcomes(self) -> list[Outcome]:
        return [r.outcome() for r in self.requests]


@dataclass
class TrafficRun:
    workload: Workload
    seed: int
    arrivals: list[Arrival]
    policies: list[PolicyRun]
    model: str
    device: str
    max_batch: int
    max_num_batched_tokens: int
    cancelled: bool = False


@dataclass(eq=False)
class _Stamped(Request):
    """A request whose events go, stamped with the emitting thread's clock, into one queue shared by the run."""
    index: int = 0
    sink: queue.Queue | None = None

    __eq__, __hash__ = object.__eq__, object.__hash__  # identity: the scheduler looks requests up in its lists

    def emit(self, event) -> None:
        if self.sink is None:  # a copy in a disaggregated worker: its events go back through the pipe
            super().emit(event)
        else:
            self.sink.put((self.index, time.perf_counter(), event))

    def __getstate__(self) -> dict:
        return {k: v for k, v in super().__getstate__().items() if k != "sink"}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(dict(state, sink=None))


def check_policies(policies: list[str]) -> list[str]:
    if not policies:
        raise EngineError("pick at least one policy to compare")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise EngineError(f"unknown policy '{unknown[0]}'; use some of: {', '.join(POLICIES)}")
    return list(dict.fromkeys(policies))  # each once, in the order given


def make_scheduler(policy: str, lm, *, max_batch: int, max_num_batched_tokens: int, max_queue: int):
    """A fresh scheduler for `policy`: a Scheduler holding `lm`, or a DisaggregatedScheduler (not started: its
    two workers load the model by name when it starts); EngineError(NOT_YET ...) when this engine lacks the policy."""
    _, kwargs = POLICIES[policy]
    kwargs = {k: (max_num_batched_tokens if v is None else v) for k, v in kwargs.items()}
    if kwargs.get("mode") == DisaggregatedScheduler.mode:
        return DisaggregatedScheduler(max_queue=max_queue, max_batch=max_batch)
    pool = ModelPool(loader=lambda *a, **k: lm)
    try:
        return Scheduler(max_batch=max_batch, max_queue=max_queue, pool=pool, **kwargs)
    except TypeError:  # an argument this Scheduler does not take yet
        raise EngineError(f"{policy}: {NOT_YET}") from None
    except EngineError as exc:
        if "unknown scheduling mode" in str(exc):
            raise EngineError(f"{policy}: {NOT_YET}") from None
        raise


def model_spec(lm) -> ModelSpec:
    """The spec that loads `lm` again (a disaggregated worker loads its own copy by name)."""
    return ModelSpec(getattr(lm, "source", None) or lm.name, lm.device.type, str(lm.dtype).removeprefix("torch."))


def check_lengths(lm, plan: list[Arrival]) -> None:
    """Every request fits the model's context; one line naming the first that does not."""
    limit = lm.config.max_seq_len
    for i, a in enumerate(plan):
        if a.output_tokens < 1:
            raise EngineError(f"request {i + 1} asks for {a.output_tokens} output tokens; every request needs at least 1")
        if a.prompt_tokens < 1:
            raise EngineError(f"request {i + 1} has an empty prompt; every prompt needs at least 1 token")
        if a.prompt_tokens + a.output_tokens > limit:
            raise EngineError(f"request {i + 1} draws {a.prompt_tokens} prompt + {a.output_tokens} output tokens, "
                              f"beyond {lm.name}'s context of {limit}; lower the lengths or their spread")


def prompt_ids(lm, n: int, rng: random.Random) -> list[int]:
    """n random token ids (no end-of-sequence id): distinct prompts, so no request helps another."""
    eos = set(lm.config.eos_token_ids or ())
    vocab = lm.config.vocab_size
    return [t if t not in eos else (t + 1) % vocab for t in (rng.randrange(vocab) for _ in range(n))]


def run_traffic(lm, workload: Workload, policies: list[str], seed: int = 0, max_batch: int = 8,
                max_num_batched_tokens: int = 256, progress=None) -> TrafficRun:
    """Replay `workload`'s arrivals (drawn once with `seed`) against each policy in turn.

    `progress(message, fraction) -> False` cancels: the policy running stops at once, and the result says so."""
    policies = check_policies(policies)
    if not isinstance(max_batch, int) or max_batch < 1:
        raise EngineError(f"the batch limit must be a whole number >= 1, not {max_batch!r}")
    plan = arrivals(workload, seed)  # EngineError for a bad workload
    if len(plan) > MAX_REQUESTS:
        raise EngineError(f"at most {MAX_REQUESTS} requests per traffic run (asked for {len(plan)})")
    check_lengths(lm, plan)
    rng = random.Random(seed)
    prompts = [prompt_ids(lm, a.prompt_tokens, rng) for a in plan]
    result = TrafficRun(workload, seed, plan, [], lm.name, str(lm.device), max_batch, max_num_batched_tokens)
    report = progress or (lambda message, fraction: True)
    for k, policy in enumerate(policies):
        run = PolicyRun(policy, POLICIES[policy][0])
        result.policies.append(run)
        try:
            sched = make_scheduler(policy, lm, max_batch=max_batch, max_num_batched_tokens=max_num_batched_tokens,
                                   max_queue=len(plan) + 2)
        except EngineError as exc:
            run.available, run.note = False, str(exc)
            continue

        def tell(done: int, k=k, policy=policy) -> bool:
            return report(f"{policy}: {done}/{len(plan)} requests served", (k + done / len(plan)) / len(policies))

        try:
            served = tell(0) and _replay(sched, lm, plan, prompts, run, tell)
        except EngineError as exc:  # this policy could not serve (its workers failed): say so, run the next
            run.available, run.note, run.requests, run.steps = False, str(exc), [], []
            continue
        if not served:
            run.note, result.cancelled = "cancelled", True
            break
    return result


def _replay(sched: Scheduler, lm, plan: list[Arrival], prompts: list[list[int]], run: PolicyRun, tell) -> bool:
    """Feed the arrivals at their moments, collect the stamped events; False if cancelled."""
    sink: queue.Queue = queue.Queue()
    spec = model_spec(lm)
    params = SamplingParams(ignore_eos=True)
    try:
        sched.start()  # inside: a disaggregated start that fails half way still stops the worker it started
        warm = _Stamped(model=spec, prompt_ids=prompts[0][:8], max_new_tokens=2, params=params, index=-1, sink=sink)
        sched.submit(warm)  # first-call costs (allocations, warm-up) belong to no request
        while not isinstance(warmed := sink.get(timeout=IDLE_LIMIT_S)[2], (Done, Failed)):
            pass
        if isinstance(warmed, Failed):  # e.g. a disaggregated worker could not load the model
            raise EngineError(warmed.message)
        t0 = time.perf_counter()
        reqs = [_Stamped(model=spec, prompt_ids=ids, max_new_tokens=a.output_tokens, params=params, index=i,
                         sink=sink, arrival=t0 + a.at_s) for i, (a, ids) in enumerate(zip(plan, prompts))]
        run.requests = [RequestRun(i, a.at_s, a.prompt_tokens, a.output_tokens) for i, a in enumerate(plan)]
        events: list[tuple[int, float, object]] = []
        sent = finished = 0
        told = heard = time.perf_counter()
        while finished < len(reqs):
            now = time.perf_counter()
            while sent < len(reqs) and reqs[sent].arrival <= now:
                sched.submit(reqs[sent])
                sent += 1
            if now - told >= TELL_EVERY_S:  # also mid-request: a Cancel is noticed within this
                told = now
                if not tell(finished):
                    return _cancel(sched, reqs)
            wait = reqs[sent].arrival - now if sent < len(reqs) else TELL_EVERY_S
            try:
                index, at, event = sink.get(timeout=min(max(wait, 0.0), TELL_EVERY_S))
            except queue.Empty:
                if sent == len(reqs) and time.perf_counter() - heard > IDLE_LIMIT_S:
                    raise EngineError(f"the engine sent nothing for {IDLE_LIMIT_S:.0f} s; the traffic run was stopped") from None
                continue
            heard = at
            events.append((index, at - t0, event))
            if isinstance(event, (Done, Failed)):
                finished += 1
                told = time.perf_counter()
                if not tell(finished):
                    return _cancel(sched, reqs)
        sched.stop()  # first: a worker's last step is logged after its last token went out
        _collect(run, events, sched, {r.id: r.index for r in reqs}, t0)
        return True
    finally:
        sched.stop()  # again on cancel or error (a second stop does nothing)


def _cancel(sched: Scheduler, reqs: list[Request]) -> bool:
    for req in reqs:
        sched.cancel(req)
    return False


def _collect(run: PolicyRun, events: list[tuple[int, float, object]], sched, index_of: dict[int, int],
             t0: float) -> None:
    """Per-request times from the events in the order the engine emitted them; the steps from the scheduler's own
    record where it keeps one (disaggregated: timeline and handovers; batch: step_log), else from the events."""
    for index, at, event in events:
        req = run.requests[index]
        if isinstance(event, Started):
            req.started_s = at
        elif isinstance(event, FirstToken):
            req.first_s = at
            req.token_s.append(at)
        elif isinstance(event, Token):
            req.token_s.append(at)
        elif isinstance(event, Failed):
            req.error = event.message
    if isinstance(sched, DisaggregatedScheduler):
        from_timeline(run, list(sched.timeline), list(sched.handovers), index_of, t0)
    elif sched.mode == "batch":
        from_step_log(run, list(sched.step_log), index_of, t0)
    else:
        from_events(run, events)
