"""The token budget of a step (vLLM's max_num_batched_tokens), checked without torch: `engine serve` refuses a bad one
in one line before it imports the engine (engine/cli.py), and the schedulers check it again where they are built."""
from __future__ import annotations

import numbers

from engine.errors import EngineError


def check_token_budget(budget, max_batch: int) -> int | None:
    """max_num_batched_tokens as given, or one clear EngineError line (None: whole prefills, no chunking)."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise EngineError(f"max_num_batched_tokens must be a whole number of tokens per step (got {budget!r})")
    if budget < max_batch:
        raise EngineError(f"max_num_batched_tokens {budget} is too small: a step holds one token for each rider and at "
                          f"least one for a joining prompt, so with max_batch {max_batch} it must be at least {max_batch}")
    return int(budget)
