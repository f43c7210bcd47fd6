"""Continuous batching: requests join the running batch between decode steps and leave as soon as they end.

Every active sequence owns one row of a shared KV cache, rows 0..n-1 (a leaving sequence's row is
filled by moving the last row into it, so the batch stays a dense view without copies). The cache grows
only what a joining request finds short (rows or positions) and shrinks once riders left it under a
quarter full; a plain step never copies it. Each rider is a Sequence (engine/core/sequence.py): its
tokens and its stop rule are the ones `generate` uses. A joining
request is prefilled alone into its row; then each decode step feeds one token per sequence, each at
its own position with its own cache length (the cache's plan masks what a shorter row must not see).
So prompts and outputs of any lengths share a step: the riders on the bridge. Compare vLLM's
scheduler (Kwon et al. 2023) and Orca's iteration-level scheduling (Yu et al. 2022).

Chunked prefill (a token budget per step) is engine/serving/scheduling/chunked_prefill.py, mixed into Batch.
"""
from __future__ import annotations

from collections import deque

import torch

from engine.core.capture import layers_within_budget
from engine.core.clock import now
from engine.core.kv_cache import KVCache
from engine.core.recorder import add_attention, finish_trace, start_trace
from engine.core.sampling import make_generator, sample_with
from engine.core.sequence import CANCELLED, Sequence
from engine.core.trace import DecodeStep, Trace
from engine.host.cpu_wait import CpuWaitMeter, Wait
from engine.host.machine_load import WATCH, LoadWatch
from engine.host.thread_governor import ThreadGovernor, use_threads
from engine.serving.scheduling.chunked_prefill import ChunkedPrefill
from engine.serving.scheduling.token_budget import check_token_budget
from engine.serving.scheduling.work import Done, Failed, ModelSpec, Request, Started, failure_message, token_event


class Rider(Sequence):
    """A Sequence on the bridge, with what only batching needs: its request, its trace and its gaps."""

    def __init__(self, request: Request, trace: Trace, lm):
        super().__init__(request.prompt_ids, request.max_new_tokens, request.params, lm.config.eos_token_ids,
                         make_generator(request.params.seed, lm.device))
        self.request, self.trace = request, trace
        self.last_ready = 0.0  # when its latest token was on the host
        self.stall = 0.0  # seconds of other requests' work since then (their prefills, captures)
        self.prefilled = 0  # prompt tokens already in its cache row (chunked prefill fills it step by step)
        self.prefill_start = 0.0
        self.wait_mark: dict[str, int] = {}  # the threads' CPU waits when its current gap began (cpu_wait.py)
        self.cpu_wait = Wait()  # its prefill's and its steps' CPU waits, added up
        self.read_mark = 0.0  # the meter's read cost when it joined (its share of what measuring cost)
        self.wait_note = ""  # why its run's CPU wait cannot be known whole (disaggregated: prefill elsewhere)
        self.governor_mark = 0  # the batch's thread governor's step count when it joined (its note from there)

    @property
    def prefilling(self) -> bool:
        return self.prefilled < len(self.prompt_ids)


class Batch(ChunkedPrefill):
    """The sequences of one model decoding together."""

    def __init__(self, lm, max_batch: int, max_num_batched_tokens: int | None = None, log: deque | None = None,
                 adaptive_threads: bool = True, load_watch: LoadWatch = WATCH, spec: ModelSpec | None = None):
        self.lm = lm
        self.spec = spec  # the model its riders asked for: a request for the same one may join (the scheduler's rule)
        self.max_batch = max_batch
        self.budget = check_token_budget(max_num_batched_tokens, max_batch)  # tokens per step; None: whole prefills
        self.log = log  # StepRecords, for whoever draws the timeline
        self.seqs: list[Rider] = []  # seqs[i] lives in cache row i
        self.cache: KVCache | None = None
        self.meter = CpuWaitMeter()  # how long the engine's threads waited for a CPU in each rider's gaps
        # every step and whole-prefill join on the governor's threads: fewer while other programs hold cores
        # (engine/host/thread_governor.py; only plain decode steps are timed for it); the window starts again whenever
        # riders join or leave (another amount of work per step), a batch forming from empty where a run would start
        threads = torch.get_num_threads()
        self.governor = (ThreadGovernor(threads) if adaptive_threads and lm.device.type == "cpu" and threads > 1
                         and self.meter.available else None)
        self._governed_riders = 0
        self.load_watch = load_watch  # other programs' load while the batch was empty: where a new batch starts

    @property
    def size(self) -> int:
        return len(self.seqs)

    def has_room(self) -> bool:
        return len(self.seqs) < self.max_batch

    # --- the cache: grown at a join, shrunk at a leave, never copied on a plain step ------------------------
    def _room_for(self, max_len: int) -> None:
        """Make sure the cache has a free row and `max_len` positions; grow only what is short."""
        rows, old = len(self.seqs) + 1, self.cache
        have_rows, have_len = (old.batch, old.max_len) if old is not None else (0, 0)
        if have_rows >= rows and have_len >= max_len:
            return
        new_rows = have_rows if have_rows >= rows else max(rows, min(self.max_batch, 2 * max(have_rows, 1)))
        self._resize(new_rows, max(have_len, max_len))

    def _shrink_if_sparse(self) -> None:
        """After riders left: give memory back once under a quarter of the rows or positions is still needed
        (to twice the riders, and to the longest reservation), so a join right after does not copy again."""
        n, cache = len(self.seqs), self.cache
        need = max(seq.reserved_len for seq in self.seqs)
        rows = 2 * n if 4 * n < cache.batch else cache.batch
        length = need if 4 * need < cache.max_len else cache.max_len
        if (rows, length) != (cache.batch, cache.max_len):
            self._resize(rows, length)

    def _resize(self, rows: int, max_len: int) -> None:
        """A new cache of rows x max_len holding the live rows' filled parts (one copy)."""
        old, lm, n = self.cache, self.lm, len(self.seqs)
        self.cache = KVCache(lm.config, rows, max_len, lm.dtype, lm.device)
        if old is not None and n:
            filled = int(old.lengths[:n].max())  # <= every live row's reservation <= max_len
            for mine, theirs in zip(self.cache.keys + self.cache.values, old.keys + old.values):
                mine[:n, :, :filled] = theirs[:n, :, :filled]  # (n, K, filled, D)
            self.cache.lengths[:n] = old.lengths[:n]

    # --- joining -----------------------------------------------------------------------------------------
    @torch.inference_mode()
    def admit(self, req: Request, started: float) -> None:
        """Prefill `req` alone into the next free row; its first token is out when this returns.

        With a token budget it only takes its row here: its prompt goes in chunk by chunk in the next steps."""
        lm = self.lm
        trace = start_trace(lm, req.prompt_ids, dict(req.params.as_dict(), max_new_tokens=req.max_new_tokens,
                                                     chat=req.chat, scheduler="batch", max_num_batched_tokens=self.budget,
                                                     adaptive_threads=self.governor is not None))
        trace.prompt_text = req.prompt_text
        trace.queue_seconds = started - req.arrival
        seq = Rider(req, trace, lm)
        req.emit(Started(trace.queue_seconds))
        grow = now(lm.device)
        self._room_for(seq.reserved_len)
        row = len(self.seqs)
        if not self.seqs and self.governor is not None:  # a batch forming: on what other programs left free
            self.governor.start_at(*self.load_watch.threads_for_run(self.governor.most))
            self._governed_riders = 0
        seq.governor_mark = self.governor.steps if self.governor is not None else 0  # its thread note from here
        if self.budget is None and lm.device.type == "cpu":  # a whole prefill: on the threads the decode steps use
            trace.settings["prefill_threads"] = self._threads_for_step(len(self.seqs))
        seq.wait_mark, seq.read_mark = self.meter.snapshot(), self.meter.read_seconds  # read outside the timing
        start = seq.prefill_start = now(lm.device)
        if self.budget is not None:
            for other in self.seqs:  # only the cache's growing came between their steps
                other.stall += start - grow
            self.seqs.append(seq)
            return
        ids = torch.tensor([req.prompt_ids], device=lm.device)  # (1, T)
        try:
            logits = lm.forward(ids, self.cache.rows(row, row + 1))[0]  # (1, V)
        finally:
            self._every_thread()
        token = int(sample_with(req.params, logits, seq.generator))
        seq.last_ready = now(lm.device)
        seq.prefilled = len(req.prompt_ids)
        trace.prefill_seconds = seq.last_ready - start
        trace.prefill_cpu_wait_seconds = self._waited(seq, self.meter.snapshot()).longest
        self._record(start, seq.last_ready, [], [(req.id, 0, len(req.prompt_ids))])
        for other in self.seqs:  # their next gap includes this prefill (and any growing of the cache)
            other.stall += seq.last_ready - grow
        self.seqs.append(seq)
        self._keep(seq, token, first=True)
        self._evict()

    # --- one crossing of the bridge, everyone together ----------------------------------------------------
    @torch.inference_mode()
    def step(self) -> None:
        if any(seq.prefilling for seq in self.seqs):
            self._mixed_step()
        elif self.seqs:
            self._decode_step()

    def step_or_fail(self) -> None:
        """One step; a step that raises ends every rider with one clear line, and the server goes on."""
        try:
            self.step()
        except Exception as exc:
            self.fail_all(f"the batched decode step failed: {failure_message(exc)}")

    def _decode_step(self) -> None:
        """Every rider decodes one token: a plain (n, 1) pass, no ragged bookkeeping."""
        n, lm = len(self.seqs), self.lm
        threads = self._threads_for_step(n)
        begin = self.meter.snapshot() if self.governor is not None else None
        start = now(lm.device)
        view = self.cache.rows(0, n)
        tokens = torch.tensor([[s.last_token] for s in self.seqs], device=lm.device)  # (n, 1)
        logits = lm.forward(tokens, view)[0]  # (n, V): rows of different lengths, each at its own position
        greedy = logits.argmax(dim=-1).tolist()
        chosen = [greedy[i] if s.request.params.greedy else int(sample_with(s.request.params, logits[i:i + 1], s.generator))
                  for i, s in enumerate(self.seqs)]
        ready = now(lm.device)
        waits, kv_bytes = self.meter.snapshot(), view.nbytes_used
        if self.governor is not None:
            self.governor.observe(ready - start, self.meter.since(begin, waits).longest)
            self._every_thread()  # chunked steps and whatever else runs between steps: every thread
        for i, (seq, token) in enumerate(zip(self.seqs, chosen)):
            seq.trace.steps.append(DecodeStep(ready - seq.last_ready, int(view.lengths[i]), kv_bytes, riders=n,
                                              stall_seconds=seq.stall, cpu_wait_seconds=self._waited(seq, waits).longest,
                                              threads=threads))
            seq.last_ready, seq.stall = ready, 0.0
            self._keep(seq, token)
        self._record(start, ready, [s.request.id for s in self.seqs], [])
        self._evict()

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _threads_for_step(self, riders: int) -> int:
        """Set the threads the governor chose for a plain decode step of `riders` (or a whole prefill joining them:
        the work per step changes either way); returns them (0: not a CPU). `_every_thread()` after it."""
        if self.governor is None:
            return torch.get_num_threads() if self.lm.device.type == "cpu" else 0
        if riders != self._governed_riders:
            self.governor.restart()
            self._governed_riders = riders
        use_threads(self.governor.threads)
        return self.governor.threads

    def _every_thread(self) -> None:
        if self.governor is not None:
            use_threads(self.governor.most)

    def _waited(self, seq: Rider, waits: dict[str, int]) -> Wait:
        """The CPU wait of `seq`'s gap that ends now (at the snapshot `waits`); its next gap starts here."""
        wait = self.meter.since(seq.wait_mark, waits)
        seq.wait_mark = waits
        seq.cpu_wait = Wait(seq.cpu_wait.longest + wait.longest, seq.cpu_wait.threads + wait.threads)
        return wait

    def _keep(self, seq: Rider, token: int, first: bool = False) -> None:
        """Give the sequence its token and stream it; the Sequence says whether it ends now."""
        req = seq.request
        seq.append(token)
        piece = seq.latest_piece(self.lm.tokenizer)
        req.emit(token_event(seq.trace, 0 if first else len(seq.trace.steps), token, piece))
        if req.cancelled.is_set():
            seq.cancel()

    @torch.inference_mode()  # moving a row writes into the cache's inference tensors
    def cancel_marked(self) -> None:
        """Sequences whose consumer went away leave now, before the next step."""
        for seq in self.seqs:
            if seq.request.cancelled.is_set():
                seq.cancel()
        self._evict()

    def fail_all(self, message: str) -> None:
        """Every rider ends with Failed(message) (a failed step, a server shutting down); the batch is empty after."""
        for seq in self.seqs:
            seq.request.emit(Failed(message))
        self.seqs, self.cache = [], None

    def _evict(self) -> None:
        """Finish ended sequences and free their rows at once (the last row moves into the hole)."""
        i, left = 0, False
        while i < len(self.seqs):
            seq = self.seqs[i]
            if not seq.finished:
                i += 1
                continue
            self._finish(seq, i)
            last = len(self.seqs) - 1
            if i != last:
                self.cache.move_row(last, i)
            else:
                self.cache.lengths[i] = 0
            self.seqs[i] = self.seqs[last]
            self.seqs.pop()
            left = True
        if not self.seqs:
            self.cache = None  # an idle server keeps no KV cache
            if left and self.governor is not None:  # the next batch looks at other programs' load from here
                self.load_watch.mark(self.governor.kept_threads)
        elif left:
            start = now(self.lm.device)
            self._shrink_if_sparse()
            for seq in self.seqs:
                seq.stall += now(self.lm.device) - start

    def _finish(self, seq: Rider, row: int) -> None:
        req, trace = seq.request, seq.trace
        trace.stop_reason = seq.stop_reason
        trace.cpu_wait_read_seconds = self.meter.read_seconds - seq.read_mark  # reads while it rode (shared ones too)
        if self.meter.available and not seq.wait_note:
            trace.cpu_wait_seconds, trace.cpu_wait_all_threads_seconds = seq.cpu_wait.longest, seq.cpu_wait.threads
        else:
            trace.cpu_wait_note = seq.wait_note or self.meter.reason
        finish_trace(self.lm, trace, [seq.output_ids], self.cache, row)
        trace.threads_note = self.governor.note(since=seq.governor_mark) if self.governor is not None else ""
        if seq.stop_reason == CANCELLED:
            req.emit(Failed("cancelled", cancelled=True))
            return
        if req.capture_attention:
            layers = layers_within_budget(self.lm.config, trace.n_prompt, trace.n_output, preferred=req.capture_layer)
            add_attention(self.lm, trace, layers)
            for other in self.seqs:
                if other is not seq:
                    other.stall += trace.capture_seconds
        req.emit(Done(trace))
