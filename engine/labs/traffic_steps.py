"""Traffic lab timelines: who shared each engine step, and in disaggregated mode each worker's lane and each KV cart.

Three sources, one shape (StepRun): the events of a queue-mode run (one request per step), a batch scheduler's
step_log (riders that decoded and the prefill chunks that rode along: Sarathi-Serve's pieces of the valley's
work), and a disaggregated coordinator's `timeline` (prefill / handover / join / step per worker) with its
`handovers` (bytes and seconds per cart). Times are perf_counter seconds (one clock for every process on this
machine), turned into seconds since the workload's start; entries of other requests (the warm-up) are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.serving.scheduling.work import FirstToken, Token


@dataclass
class StepRun:
    """One engine step: a prefill (or prefill chunks), a decode step (the riders that crossed together), or in
    disaggregated mode a worker's handover / join. `requests`: everyone in it; `chunks`: prefill pieces
    (request, first prompt position, tokens); `worker`: "prefill" or "decode" in disaggregated mode."""
    kind: str  # "prefill", "decode", "handover" or "join"
    start_s: float
    end_s: float
    requests: list[int]
    chunks: list[tuple[int, int, int]] = field(default_factory=list)
    worker: str = ""
    bytes: int = 0  # a handover's or join's cart

    @property
    def riders(self) -> list[int]:
        """The requests that took one decode token in this step."""
        chunked = {c[0] for c in self.chunks}
        return [i for i in self.requests if i not in chunked]


@dataclass
class HandoverRun:
    """One KV cart from the prefill worker to the decode worker; times in seconds."""
    index: int
    bytes: int
    tokens: int
    write_s: float
    read_s: float
    crossing_s: float  # prefill end -> joined the bridge's batch (write, pipe, wait for the bridge, read)


def from_events(run, events: list[tuple[int, float, object]]) -> None:
    """Queue mode: a FirstToken ends the request's prefill; a Token starts a step of `riders` back-to-back tokens."""
    left = 0
    for index, at, event in events:
        req = run.requests[index]
        if isinstance(event, FirstToken):
            start = req.started_s if req.started_s is not None else at
            run.steps.append(StepRun("prefill", start, at, [index], [(index, 0, req.prompt_tokens)]))
        elif isinstance(event, Token):
            if left > 0:
                run.steps[-1].requests.append(index)
                run.steps[-1].end_s = at
                left -= 1
            else:
                busy = max(event.step.seconds - event.step.stall_seconds, 0.0)
                run.steps.append(StepRun("decode", at - busy, at, [index]))
                left = event.step.riders - 1


def from_step_log(run, log, index_of: dict[int, int], t0: float) -> None:
    """Batch mode (chunked or not): each StepRecord of this run's requests, its riders and its chunks."""
    for rec in log:
        decode = [index_of[i] for i in rec.decode if i in index_of]
        chunks = [(index_of[i], first, n) for i, first, n in rec.chunks if i in index_of]
        if not decode and not chunks:
            continue  # the warm-up, or another run's step
        kind = "decode" if decode else "prefill"
        run.steps.append(StepRun(kind, rec.start - t0, rec.end - t0, decode + [c[0] for c in chunks], chunks))


def from_timeline(run, timeline, handovers, index_of: dict[int, int], t0: float) -> None:
    """Disaggregated mode: both workers' steps (lanes) and every cart that crossed between them."""
    kinds = {"prefill": "prefill", "handover": "handover", "join": "join", "step": "decode"}
    for entry in timeline:
        ids = [index_of[i] for i in entry.get("ids", []) if i in index_of]
        if not ids or entry.get("kind") not in kinds:
            continue
        kind = kinds[entry["kind"]]
        chunks = [(ids[0], 0, int(entry.get("tokens", 0)))] if kind == "prefill" else []
        run.steps.append(StepRun(kind, entry["start"] - t0, entry["end"] - t0, ids, chunks, entry["worker"],
                                 int(entry.get("bytes", 0))))
    run.steps.sort(key=lambda s: s.start_s)
    run.handovers = [HandoverRun(index_of[h["id"]], int(h["bytes"]), int(h["tokens"]), h["write_seconds"],
                                 h["read_seconds"], h["crossing_seconds"]) for h in handovers if h["id"] in index_of]
    run.handovers.sort(key=lambda h: h.index)
