"""Chunked prefill: a joining prompt goes in by chunks that share the riders' decode steps, within a token budget.

Sarathi-Serve (Agrawal et al. 2024) and vLLM's max_num_batched_tokens: with a token budget per step, a joining
prompt is not prefilled alone (which stalls every rider for the whole prompt) but in chunks that ride along the
decode steps: each rider takes one token, the joiners' chunks the rest of the budget, all in one ragged forward
pass (engine/core/model.py). The riders' worst gap shrinks; the joiner's first token comes later. Every step is
logged (StepRecord) for the Traffic lab's timeline. Mixed into engine/serving/scheduling/continuous_batch.py's Batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.core.clock import now
from engine.core.sampling import sample_with
from engine.core.trace import DecodeStep


@dataclass
class StepRecord:
    """One engine step and who shared it (times: perf_counter seconds, as Request.arrival)."""
    start: float
    end: float
    decode: list[int] = field(default_factory=list)  # request ids that took one decode token each
    chunks: list[tuple[int, int, int]] = field(default_factory=list)  # (request id, first prompt position, tokens)


class ChunkedPrefill:
    """Batch's mixed steps: its `budget` (tokens per step), `seqs` (one cache row each), `cache`, `lm`, `log`,
    `meter` and `_waited` (the CPU wait of each rider's gap)."""

    def _shares(self) -> list[int]:
        """Tokens each row takes this step: one per decoding rider, the rest of the budget to the joiners'
        chunks in the order they arrived (the budget's check leaves the first joiner at least one)."""
        counts = [0 if seq.prefilling else 1 for seq in self.seqs]
        room = self.budget - sum(counts)
        for i in sorted(range(len(self.seqs)), key=lambda i: self.seqs[i].request.arrival):
            seq = self.seqs[i]
            if seq.prefilling and room > 0:
                counts[i] = min(room, len(seq.prompt_ids) - seq.prefilled)
                room -= counts[i]
        return counts

    def _mixed_step(self) -> None:
        """One ragged pass: riders' decode tokens and joiners' prompt chunks, laid end to end."""
        lm, seqs, counts = self.lm, self.seqs, self._shares()
        start = now(lm.device)
        view = self.cache.rows(0, len(seqs))
        plan = view.plan_ragged(counts)
        chunks = [(s.request.id, s.prefilled, c) for s, c in zip(seqs, counts) if c and s.prefilling]
        decode = [s.request.id for s, c in zip(seqs, counts) if c and not s.prefilling]
        flat = [t for s, c in zip(seqs, counts) if c
                for t in (s.prompt_ids[s.prefilled:s.prefilled + c] if s.prefilling else [s.last_token])]
        threads = self._threads_for_step(len(seqs))  # the threads the plain steps chose (not timed for them)
        try:
            logits, _ = lm.forward(torch.tensor([flat], device=lm.device), view, plan=plan)  # (rows in plan, V)
        finally:
            self._every_thread()
        chosen = {}
        for j, row in enumerate(plan.rows):
            seq = seqs[row]
            if seq.prefilling:
                seq.prefilled += counts[row]
            if not seq.prefilling:  # a rider's next token, or a joiner's first once its last chunk is in
                chosen[row] = int(sample_with(seq.request.params, logits[j:j + 1], seq.generator))
        ready = now(lm.device)
        waits, kv_bytes = self.meter.snapshot(), view.nbytes_used
        for row, token in chosen.items():
            seq = seqs[row]
            first = not seq.output_ids
            wait = self._waited(seq, waits).longest  # a joiner's whole prefill (every chunk), or a rider's gap
            if first:
                seq.trace.prefill_seconds = ready - seq.prefill_start
                seq.trace.prefill_cpu_wait_seconds = wait
            else:
                seq.trace.steps.append(DecodeStep(ready - seq.last_ready, int(view.lengths[row]), kv_bytes,
                                                  riders=len(plan.rows), stall_seconds=seq.stall,
                                                  cpu_wait_seconds=wait,
                                                  threads=threads))
            seq.last_ready, seq.stall = ready, 0.0
            self._keep(seq, token, first=first)
        self._record(start, ready, decode, chunks)
        self._evict()

    def _record(self, start: float, end: float, decode: list[int], chunks: list[tuple[int, int, int]]) -> None:
        if self.log is not None:
            self.log.append(StepRecord(start, end, decode, chunks))
