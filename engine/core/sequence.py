"""One sequence's life from prompt to stop: its tokens, its status and the one stop rule every path uses.

A Sequence owns its prompt ids, the ids it generated, its sampling settings and generator, and why
it ended (None while it runs). `generate` keeps one per batch row, continuous batching one per
rider, and the HTTP front end asks the same `stop_reason` rule when its answer is complete (it adds
only stop *strings*, a text-level rule of the OpenAI API). Modelled on nano-vllm's `Sequence`.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from engine.core.prompting import token_pieces
from engine.core.sampling_params import SamplingParams

EOS, LENGTH, CANCELLED = "eos", "length", "cancelled"  # the reasons a sequence ends (Trace.stop_reason)


def stop_reason(token: int, n_output: int, max_new_tokens: int, eos_ids: Iterable[int],
                ignore_eos: bool = False) -> str | None:
    """Why a sequence ends once `token` is its `n_output`-th new token: "eos", "length", or None to go on.

    An end-of-text token wins over the length limit (the text really ended), unless ignore_eos.
    """
    if not ignore_eos and token in eos_ids:
        return EOS
    if n_output >= max_new_tokens:
        return LENGTH
    return None


class Sequence:
    """One prompt being continued: append each sampled token, and it says when it is over."""

    def __init__(self, prompt_ids: list[int], max_new_tokens: int, params: SamplingParams | None = None,
                 eos_ids: Iterable[int] = (), generator: torch.Generator | None = None):
        self.prompt_ids = list(prompt_ids)
        self.output_ids: list[int] = []
        self.max_new_tokens = max_new_tokens  # checked where the request came in, not here
        self.params = params or SamplingParams()
        self.eos_ids = frozenset(eos_ids)
        self.generator = generator  # its own random stream (None: the caller samples for it)
        self.stop_reason: str | None = None  # "eos", "length" or "cancelled" once it is over

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None

    @property
    def last_token(self) -> int:
        """The token the next decode step feeds in."""
        return self.output_ids[-1] if self.output_ids else self.prompt_ids[-1]

    @property
    def reserved_len(self) -> int:
        """Cache positions this sequence may need at most: prompt + every token it may generate."""
        return len(self.prompt_ids) + self.max_new_tokens

    def append(self, token: int) -> str | None:
        """Record a new token; return why the sequence ends now, or None while it goes on."""
        if self.finished:
            raise ValueError(f"this sequence already ended ({self.stop_reason}); it takes no more tokens")
        self.output_ids.append(token)
        self.stop_reason = stop_reason(token, len(self.output_ids), self.max_new_tokens, self.eos_ids,
                                       self.params.ignore_eos)
        return self.stop_reason

    def cancel(self) -> None:
        """Whoever waited went away: end it now (a sequence that already ended keeps its reason)."""
        if not self.finished:
            self.stop_reason = CANCELLED

    def latest_piece(self, tokenizer) -> str:
        """Readable text of the newest token, for streaming (a split character waits for its last byte)."""
        context = self.output_ids[-5:]
        return token_pieces(tokenizer, context)[-1] if context else ""
