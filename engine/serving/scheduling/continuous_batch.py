"""Continuous batching: requests join the running batch between decode steps and leave as soon as they end.

Every active sequence owns one row of a shared KV cache, rows 0..n-1 (a leaving sequence's row is
filled by moving the last row into it, so the batch stays a dense view without copies). A joining
request is prefilled alone into its row; then each decode step feeds one token per sequence, each at
its own position with its own cache length (the cache's plan masks what a shorter row must not see).
So prompts and outputs of any lengths share a step: the riders on the bridge. Compare vLLM's
scheduler (Kwon et al. 2023) and Orca's iteration-level scheduling (Yu et al. 2022).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.core.capture import capture_attention, layers_within_budget
from engine.core.clock import now
from engine.core.kv_cache import KVCache
from engine.core.prompting import token_pieces
from engine.core.recorder import finish_trace, start_trace
from engine.core.sampling import make_generator, sample_with
from engine.core.trace import DecodeStep, Trace
from engine.serving.scheduling.work import Done, Failed, FirstToken, Request, Started, Token


@dataclass
class Sequence:
    request: Request
    trace: Trace
    generator: torch.Generator
    outputs: list[int] = field(default_factory=list)
    last_ready: float = 0.0  # when its latest token was on the host
    stall: float = 0.0  # seconds of other requests' work since then (their prefills, captures)
    ended: str | None = None  # stop reason once it is over


class Batch:
    """The sequences of one model decoding together."""

    def __init__(self, lm, max_batch: int):
        self.lm = lm
        self.max_batch = max_batch
        self.seqs: list[Sequence] = []  # seqs[i] lives in cache row i
        self.cache: KVCache | None = None

    @property
    def size(self) -> int:
        return len(self.seqs)

    def has_room(self) -> bool:
        return len(self.seqs) < self.max_batch

    # --- joining -----------------------------------------------------------------------------------------
    def _room_for(self, max_len: int) -> None:
        """Make sure the cache has a free row and `max_len` positions (grow by copying the filled parts)."""
        rows = len(self.seqs) + 1
        old = self.cache
        if old is not None and old.batch >= rows and old.max_len >= max_len:
            return
        new_rows = max(rows, min(self.max_batch, 2 * (old.batch if old else 1)))
        new_len = max(max_len, old.max_len if old else 0)
        lm = self.lm
        self.cache = KVCache(lm.config, new_rows, new_len, lm.dtype, lm.device)
        if old is not None:
            for mine, theirs in zip(self.cache.keys + self.cache.values, old.keys + old.values):
                n = min(old.max_len, new_len)
                mine[: old.batch, :, :n] = theirs[:, :, :n]
            self.cache.lengths[: old.batch] = old.lengths

    @torch.inference_mode()
    def admit(self, req: Request, started: float) -> None:
        """Prefill `req` alone into the next free row; its first token is out when this returns."""
        lm = self.lm
        T = len(req.prompt_ids)
        self._room_for(T + req.max_new_tokens)
        row = len(self.seqs)
        trace = start_trace(lm, req.prompt_ids, dict(req.params.as_dict(), max_new_tokens=req.max_new_tokens,
                                                     chat=req.chat, scheduler="batch"))
        trace.prompt_text = req.prompt_text
        trace.queue_seconds = started - req.arrival
        seq = Sequence(req, trace, make_generator(req.params.seed, lm.device))
        req.emit(Started(trace.queue_seconds))
        start = now(lm.device)
        ids = torch.tensor([req.prompt_ids], device=lm.device)  # (1, T)
        logits = lm.model(ids, self.cache.rows(row, row + 1))[0]  # (1, V)
        token = int(sample_with(req.params, logits, seq.generator))
        seq.last_ready = now(lm.device)
        trace.prefill_seconds = seq.last_ready - start
        for other in self.seqs:  # their next gap includes this prefill
            other.stall += seq.last_ready - start
        self.seqs.append(seq)
        self._keep(seq, token, first=True)
        self._evict()

    # --- one crossing of the bridge, everyone together ----------------------------------------------------
    @torch.inference_mode()
    def step(self) -> None:
        n = len(self.seqs)
        if n == 0:
            return
        lm = self.lm
        view = self.cache.rows(0, n)
        tokens = torch.tensor([[s.outputs[-1]] for s in self.seqs], device=lm.device)  # (n, 1)
        logits = lm.model(tokens, view)[0]  # (n, V): rows of different lengths, each at its own position
        greedy = logits.argmax(dim=-1).tolist()
        chosen = [greedy[i] if s.request.params.greedy else int(sample_with(s.request.params, logits[i:i + 1], s.generator))
                  for i, s in enumerate(self.seqs)]
        ready = now(lm.device)
        kv_bytes = view.nbytes_used
        for i, (seq, token) in enumerate(zip(self.seqs, chosen)):
            seq.trace.steps.append(DecodeStep(ready - seq.last_ready, int(view.lengths[i]), kv_bytes, riders=n,
                                              stall_seconds=seq.stall))
            seq.last_ready, seq.stall = ready, 0.0
            self._keep(seq, token)
        self._evict()

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _keep(self, seq: Sequence, token: int, first: bool = False) -> None:
        """Record a token, stream it, and mark the sequence as ended when it should stop."""
        req = seq.request
        seq.outputs.append(token)
        piece = token_pieces(self.lm.tokenizer, seq.outputs[-5:])[-1]
        if first:
            req.emit(FirstToken(seq.trace.prefill_seconds, token, piece))
        else:
            req.emit(Token(seq.trace.steps[-1], token, piece))
        if req.cancelled.is_set():
            seq.ended = "cancelled"
        elif not req.params.ignore_eos and token in self.lm.config.eos_token_ids:
            seq.ended = "eos"
        elif len(seq.outputs) >= req.max_new_tokens:
            seq.ended = "length"

    def cancel_marked(self) -> None:
        """Sequences whose consumer went away leave now, before the next step."""
        for seq in self.seqs:
            if seq.request.cancelled.is_set() and seq.ended is None:
                seq.ended = "cancelled"
        self._evict()

    def fail_all(self, message: str) -> None:
        for seq in self.seqs:
            seq.request.emit(Failed(message))
        self.seqs, self.cache = [], None

    def _evict(self) -> None:
        """Finish ended sequences and free their rows at once (the last row moves into the hole)."""
        i = 0
        while i < len(self.seqs):
            seq = self.seqs[i]
            if seq.ended is None:
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
        if not self.seqs:
            self.cache = None  # an idle server keeps no KV cache

    def _finish(self, seq: Sequence, row: int) -> None:
        req, trace = seq.request, seq.trace
        trace.stop_reason = seq.ended
        finish_trace(self.lm, trace, [seq.outputs], self.cache, row)
        if seq.ended == "cancelled":
            req.emit(Failed("cancelled", cancelled=True))
            return
        if req.capture_attention:
            start = now(self.lm.device)
            layers = layers_within_budget(self.lm.config, trace.n_prompt, trace.n_output, preferred=req.capture_layer)
            trace.attention = capture_attention(self.lm, trace.prompt_ids, trace.output_ids, layers)
            trace.capture_seconds = now(self.lm.device) - start
            for other in self.seqs:
                if other is not seq:
                    other.stall += trace.capture_seconds
        req.emit(Done(trace))
