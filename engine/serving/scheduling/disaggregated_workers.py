"""The two workers of disaggregated serving, each a process with its own torch threads: the valley and the bridge.

The prefill worker (the valley) runs one prompt at a time in a single forward pass, samples its first token and
packs its KV cache into a shared block (engine/serving/scheduling/kv_handover.py); it also runs lab jobs. The decode
worker (the bridge) takes the handed-over sequences into one continuously batched KV cache and steps them together;
a prefill never runs there, so its riders' gaps hold only decode steps and the short copy of each joining cart.
Both report every step (start, end, who) to the coordinator (engine/serving/scheduling/disaggregated.py), which
keeps the timeline. Started as `python -m engine.serving.scheduling.disaggregated_workers ADDRESS ROLE`.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Client
from pathlib import Path

import torch

from engine.core.clock import now
from engine.core.kv_cache import KVCache
from engine.core.recorder import add_attention, finish_trace, start_trace
from engine.core.sampling import make_generator, sample_with
from engine.core.sequence import Sequence
from engine.core.trace import Trace
from engine.loading.loader import set_threads
from engine.serving.scheduling.continuous_batch import Batch, Rider
from engine.serving.scheduling.job_runner import run_lab_job
from engine.serving.scheduling.kv_handover import Handover, block_path, discard_path, pack, unpack
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.waiting_queue import check_with_model
from engine.serving.scheduling.work import Done, Failed, Job, Request, Started, Work, failure_message, token_event
from engine.serving.scheduling.worker_side import DECODE, PREFILL


@dataclass
class Carried:
    """A prefilled request on its way to the bridge: its cart, its first token and what its trace knows so far."""
    handover: Handover
    first_token: int
    trace: Trace
    generator_state: bytes | None  # the sampler's state after the first token, as bytes (a tensor would be
    # pickled through torch's own shared-memory channel, which processes started apart cannot open)
    ready: float  # perf_counter when the first token was out (one clock for all processes on this machine)
    started: float = 0.0  # perf_counter when its prefill began


class _Link:
    """A worker's end of its pipe: a reader thread files tasks in order and sets cancel flags at once."""

    def __init__(self, conn):
        self.conn, self.lock = conn, threading.Lock()
        self.tasks: queue.Queue = queue.Queue()
        self.works: dict[int, Work] = {}  # received and not finished
        self.cancelled: set[int] = set()  # cancels that came before their work
        threading.Thread(target=self._read, name="two-bends-link", daemon=True).start()

    def send(self, kind: str, key: int, payload) -> None:
        with self.lock:
            self.conn.send((kind, key, payload))

    def _read(self) -> None:
        while True:
            try:
                kind, payload = self.conn.recv()
            except (EOFError, OSError):  # the coordinator is gone: so is our purpose
                self.tasks.put(("stop", None))
                return
            if kind == "cancel":
                work = self.works.get(payload)
                (work.cancelled.set() if work is not None else self.cancelled.add(payload))
                continue
            work = payload[0] if kind == "join" else payload if kind == "work" else None
            if work is not None:
                work.events = _Sink(self, work.id)
                self.works[work.id] = work
                if work.id in self.cancelled:
                    work.cancelled.set()
            self.tasks.put((kind, payload))

    def log(self, worker: str, kind: str, start: float, end: float, ids: list[int], **extra) -> None:
        self.send("log", 0, dict(worker=worker, kind=kind, start=start, end=end, ids=ids, **extra))


class _Sink:
    """Stands in for a work item's event queue: every event goes to the coordinator, who routes it."""

    def __init__(self, link: _Link, work_id: int):
        self.link, self.work_id = link, work_id

    def put(self, event) -> None:
        self.link.send("event", self.work_id, event)
        if isinstance(event, (Done, Failed)):
            self.link.works.pop(self.work_id, None)
            self.link.cancelled.discard(self.work_id)


# --- the valley ----------------------------------------------------------------------------------------------
def prefill_main(link: _Link, session: str) -> None:
    pool = ModelPool()
    while True:
        kind, work = link.tasks.get()
        if kind == "stop":
            return
        try:
            if isinstance(work, Job):
                run_lab_job(work, pool)  # alone, on the valley's model; the bridge goes on decoding
            else:
                _prefill(link, pool, work, session)
        except Exception as exc:  # one request's failure never stops the worker
            work.emit(Failed(failure_message(exc)))
        link.send("idle", work.id, None)


@torch.inference_mode()
def _prefill(link: _Link, pool: ModelPool, req: Request, session: str) -> None:
    """The whole prompt in one forward pass, the first token sampled, the cache packed for the bridge."""
    started = time.perf_counter()
    if req.cancelled.is_set():
        req.emit(Failed("cancelled", cancelled=True))
        return
    lm = pool.get(req.model)
    check_with_model(req, lm)  # as batch mode does
    trace = start_trace(lm, req.prompt_ids, dict(req.params.as_dict(), max_new_tokens=req.max_new_tokens,
                                                 chat=req.chat, scheduler="disaggregated"))
    trace.prompt_text, trace.queue_seconds = req.prompt_text, started - req.arrival
    req.emit(Started(trace.queue_seconds))
    seq = Sequence(req.prompt_ids, req.max_new_tokens, req.params, lm.config.eos_token_ids,
                   make_generator(req.params.seed, lm.device))
    cache = KVCache(lm.config, 1, len(req.prompt_ids), lm.dtype, lm.device)
    start = now(lm.device)
    ids = torch.tensor([req.prompt_ids], device=lm.device)  # (1, T)
    logits = lm.forward(ids, cache)[0]  # (1, V)
    token = int(sample_with(req.params, logits, seq.generator))
    ready = now(lm.device)
    trace.prefill_seconds = ready - start
    seq.append(token)
    req.emit(token_event(trace, 0, token, seq.latest_piece(lm.tokenizer)))
    link.log(PREFILL, "prefill", start, ready, [req.id], tokens=len(req.prompt_ids))
    if req.cancelled.is_set():
        req.emit(Failed("cancelled", cancelled=True))
        return
    if seq.finished:  # one token was all it needed: it never crosses
        trace.stop_reason = seq.stop_reason
        finish_trace(lm, trace, [seq.output_ids], cache, 0)
        if req.capture_attention:
            add_attention(lm, trace)
        req.emit(Done(trace))
        return
    handover = pack(cache, 0, block_path(session, req.id))
    link.log(PREFILL, "handover", ready, ready + handover.write_seconds, [req.id], bytes=handover.nbytes)
    state = seq.generator.get_state().numpy().tobytes() if seq.generator is not None else None
    link.works.pop(req.id, None)  # from here on the coordinator and the bridge own it
    link.send("handover", req.id, Carried(handover, token, trace, state, ready, start))


# --- the bridge ----------------------------------------------------------------------------------------------
class HandedBatch(Batch):
    """Continuous batching whose riders arrive prefilled: a join copies a cart into a free row, never runs the model."""

    @torch.inference_mode()
    def join(self, req: Request, carried: Carried) -> None:
        lm, trace = self.lm, carried.trace
        seq = Rider(req, trace, lm)
        if carried.generator_state is not None and seq.generator is not None:
            seq.generator.set_state(torch.frombuffer(bytearray(carried.generator_state), dtype=torch.uint8))
        seq.prefilled = len(req.prompt_ids)  # its prompt is in the cart: no chunk of it runs here
        seq.append(carried.first_token)  # streamed by the valley already
        grow = now(lm.device)
        self._room_for(seq.reserved_len)
        unpack(carried.handover, self.cache, len(self.seqs))
        joined = now(lm.device)
        for other in self.seqs:  # their next gap holds this copy (and any growing of the cache)
            other.stall += joined - grow
        seq.last_ready, seq.stall = carried.ready, joined - carried.ready  # its first gap holds the crossing
        seq.wait_mark, seq.read_mark = self.meter.snapshot(), self.meter.read_seconds
        seq.wait_note = ("its prefill ran in the prefill worker's process, whose CPU wait this trace does not "
                         "carry, so the run's CPU wait was not measured")
        h = carried.handover
        # the cart, and when (perf_counter, one clock on this machine): its token times are prefill_end + the
        # running sum of its steps' seconds, so a set of traces redraws both workers' lanes
        trace.settings["handover"] = dict(bytes=h.nbytes, tokens=h.tokens, write_seconds=h.write_seconds,
                                          read_seconds=h.read_seconds, crossing_seconds=joined - carried.ready,
                                          prefill_start=carried.started, prefill_end=carried.ready, joined=joined)
        self.seqs.append(seq)
        if req.cancelled.is_set():
            seq.cancel()
            self._evict()


def decode_main(link: _Link, max_batch: int) -> None:
    pool = ModelPool()
    batches: dict[object, HandedBatch] = {}
    while True:
        busy = any(b.size for b in batches.values())
        try:
            kind, payload = link.tasks.get(block=not busy)
        except queue.Empty:
            kind = None
        if kind == "stop":
            for batch in batches.values():
                batch.fail_all("the server is shutting down")
            return
        if kind == "join":
            _join(link, pool, batches, max_batch, *payload)
        elif kind == "load":
            try:
                pool.get(payload)
            except Exception as exc:  # the valley reports the same failure to whoever asked
                link.log(DECODE, "load-failed", time.perf_counter(), time.perf_counter(), [], error=str(exc))
        if kind is not None and not link.tasks.empty():
            continue  # take every waiting cart before the next step
        for batch in batches.values():
            if batch.size:
                _step(link, batch)


def _join(link: _Link, pool: ModelPool, batches: dict, max_batch: int, req: Request, carried: Carried) -> None:
    start = time.perf_counter()
    if req.cancelled.is_set():  # cancelled while it crossed
        discard_path(Path(carried.handover.path))
        req.emit(Failed("cancelled", cancelled=True))
        return
    try:
        lm = pool.get(req.model)
        batch = batches.get(req.model)
        if batch is None:
            batch = batches[req.model] = HandedBatch(lm, max_batch)
        batch.join(req, carried)
    except Exception as exc:
        discard_path(Path(carried.handover.path))
        req.emit(Failed(failure_message(exc)))
        return
    h = carried.handover
    link.log(DECODE, "join", start, time.perf_counter(), [req.id], bytes=h.nbytes)
    link.send("joined", req.id, dict(id=req.id, bytes=h.nbytes, tokens=h.tokens, write_seconds=h.write_seconds,
                                     read_seconds=h.read_seconds, crossing_seconds=time.perf_counter() - carried.ready))


def _step(link: _Link, batch: HandedBatch) -> None:
    batch.cancel_marked()
    if not batch.size:
        return
    ids, start = [s.request.id for s in batch.seqs], time.perf_counter()
    batch.step_or_fail()
    link.log(DECODE, "step", start, time.perf_counter(), ids, riders=len(ids))


def main(address: str, role: str) -> None:
    conn = Client(address, family="AF_UNIX", authkey=bytes.fromhex(os.environ.pop("TWO_BENDS_WORKER_KEY")))
    options = conn.recv()
    set_threads(options["threads"])
    link = _Link(conn)
    link.send("ready", 0, os.getpid())
    if role == PREFILL:
        prefill_main(link, options["session"])
    else:
        decode_main(link, options["max_batch"])


if __name__ == "__main__":  # run the module's own copy, so what it pickles (Carried) names its real module
    from engine.serving.scheduling.disaggregated_workers import main as _main

    _main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # its work is over and reported: skip the interpreter's seconds-long teardown of torch's modules
