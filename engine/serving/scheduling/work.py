"""What the scheduler takes in and hands back: requests and jobs, and the events each one produces.

A consumer (a dashboard session, an HTTP connection, a lab) submits a Request or a Job and reads
its events in order until a final one (Done or Failed). Events are small plain dataclasses so they
cross a process boundary (pickle) as easily as a thread boundary (queue.Queue).
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field

from engine.core.config import ModelConfig
from engine.core.sampling_params import SamplingParams
from engine.core.trace import DecodeStep
from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL

_ids = itertools.count(1)

# what a run's kernels label says when it started before the model pool's background work at start-up ended
PREPACKING = "still being prepacked in the background"
COMPILING = "the decode step was still being compiled in the background"
# ... and what its Trace records of that work in env["backends"]["pending"] (engine/core/backends.py): ui/text reads
# them (that work takes CPU from the run, so its CPU wait names it); here, not in model_pool: no torch to read them
PENDING_KERNELS = "fast kernels"  # the run ran plain nn.Linear while the fast kernels were prepacked
PENDING_DECODE_STEP = "decode step"  # the run ran the prepacked kernels while the decode step was built



@dataclass
class ModelInfo:
    """A loaded model as the worker describes it to the dashboard's process (model_pool.describe): here, with no
    torch import, so that process reads it without loading torch."""
    spec: ModelSpec
    name: str
    device: str
    dtype: str
    config: ModelConfig
    tokenizer: object
    weight_bytes: int
    kernels: str
    load_seconds: float
    kernel_why: str = ""  # fast on CPU: the measured ms of each candidate kernel (engine/techniques/kernel_choice.py)

class QueueFull(EngineError):
    """The operator's queue limit is reached; `retry_after` estimates when a place frees up (seconds)."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self):
        """Pickled with its retry_after, so a worker process can send it back (plain exceptions pickle args only)."""
        return type(self), (str(self), self.retry_after)


@dataclass(frozen=True)
class ModelSpec:
    """Which model a request runs on: the worker loads each spec once and keeps it."""
    name: str = DEFAULT_MODEL
    device: str = "auto"
    dtype: str = "float32"
    kernels: str = "fast"  # "fast" or "plain" (engine/techniques/kernels.py)


# --- events ------------------------------------------------------------------------------------------------
@dataclass
class Queued:
    position: int  # 1 = next to run
    expected_wait_s: float  # estimate from recent runs (requests ahead + the one running)


@dataclass
class Started:
    queue_seconds: float  # arrival to the start of its prefill (vLLM: request queue time)


@dataclass
class FirstToken:
    prefill_seconds: float  # TTFT (prefill pass + first sampling), queueing excluded
    token_id: int
    piece: str  # readable text of the token


@dataclass
class Token:
    step: DecodeStep  # this token's gap, cache size, riders on the bridge
    token_id: int
    piece: str


def token_event(trace, index: int, token: int, piece: str) -> FirstToken | Token:
    """Output token `index` of `trace` as every consumer reads it, whichever loop made it (queue mode's `generate`,
    the batch's step, the disaggregated valley): the first with its prefill's seconds, each later one with its decode
    step (the gap since the token before, its cache size, the riders beside it)."""
    if index == 0:
        return FirstToken(trace.prefill_seconds, token, piece)
    return Token(trace.steps[index - 1], token, piece)


@dataclass
class Progress:
    message: str
    fraction: float
    payload: object = None  # a job's partial result (e.g. a sweep's points so far)


@dataclass
class Done:
    result: object  # a Trace for a Request, the function's return value for a Job


@dataclass
class Failed:
    message: str
    cancelled: bool = False


FINAL = (Done, Failed)


def failure_message(exc: Exception) -> str:
    """One clear line for a failure: an EngineError's own words, else the exception's first line and where."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory: try a shorter prompt or fewer output tokens"
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (at {where.name})"


# --- work items --------------------------------------------------------------------------------------------
@dataclass
class Work:
    """Common part of requests and jobs: identity, arrival time, cancellation and the event stream."""
    model: ModelSpec = field(default_factory=ModelSpec)
    id: int = field(default_factory=lambda: next(_ids))
    arrival: float = field(default_factory=time.perf_counter)
    events: queue.Queue = field(default_factory=queue.Queue, repr=False)
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    def emit(self, event) -> None:
        self.events.put(event)

    def cancel(self) -> None:
        self.cancelled.set()

    def __getstate__(self) -> dict:
        """Pickled without its queue and flag (a copy in another process gets fresh ones)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("events", "cancelled")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, events=queue.Queue(), cancelled=threading.Event())


@dataclass
class Request(Work):
    """One generation: token ids in, a Trace out (streamed token by token)."""
    prompt_ids: list[int] = field(default_factory=list)
    max_new_tokens: int = 16
    params: SamplingParams = field(default_factory=SamplingParams)
    prompt_text: str = ""
    chat: bool = False
    capture_attention: bool = False  # capture (untimed) after the run, within engine.core.capture's budget
    capture_layer: int | None = None  # the layer to keep when the budget allows only some


@dataclass
class Job(Work):
    """Exclusive use of the model for a lab measurement: the registered lab job `name` with its arguments.

    `name` is a key of engine/serving/scheduling/lab_jobs.py's registry, never a dotted path: the worker looks it up, checks
    `args` and `kwargs` against the job's declared argument types, and passes the progress callback the
    job declares.
    """
    name: str = ""
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str = "lab measurement"


def drain(work: Work, timeout: float | None = None):
    """Iterate over a work item's events until its final one (a helper for tests and the CLI)."""
    while True:
        event = work.events.get(timeout=timeout)
        yield event
        if isinstance(event, FINAL):
            return


def result_of(work: Work, timeout: float | None = None):
    """Wait for the final event: the result, or EngineError with the failure's message."""
    for event in drain(work, timeout):
        if isinstance(event, Done):
            return event.result
        if isinstance(event, Failed):
            raise EngineError(event.message)


# --- what the engine worker is asked to run (engine/serving/scheduling/worker.py) ---------------------------------
@dataclass(frozen=True)
class ServiceOptions:
    mode: str = "queue"  # "queue", "batch" or "disaggregated"
    max_queue: int = 64  # waiting requests before new ones are refused
    max_new_tokens_cap: int = 4096  # most new tokens one request may ask for
    max_batch: int = 8  # sequences sharing a decode step in batch mode
    max_num_batched_tokens: int | None = None  # batch mode's token budget per step (chunked prefill); None: whole prefills
    threads: int = 0  # torch threads in the worker (0 = torch's default: every core)
    fixed_threads: bool = False  # queue mode: every decode step at `threads` (default: fewer while other programs
    # hold cores, chosen by measurement: engine/host/thread_governor.py)
    preload: ModelSpec | None = None  # load this model at start, before the first request
    # fast kernels prepacked in the background, runs meanwhile on plain nn.Linear and saying so (model_pool.py); the
    # dashboard's early-started worker only (a fast start); not part of equality: any such worker may be adopted
    prepack_in_background: bool = field(default=False, compare=False)
