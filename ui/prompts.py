"""Example prompts, and fitting a prompt to exactly N tokens so prompt length is a controlled variable.

Prompt length is what sets the cost of the valley (prefill), so the sidebar lets the class choose it
in tokens. `fit_prompt_to_tokens` trims the tokenised text from the end, or repeats it, until it has
exactly N tokens; the ids it returns are what the engine receives, the text is their decoding.
Streamlit-free.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROMPTS_FILE = Path(__file__).resolve().parent.parent / "assets" / "prompts.json"
FILL_SEPARATOR = "\n\n"  # placed between repeats when a short text is repeated to fill N tokens


@dataclass(frozen=True)
class Example:
    key: str
    label: str
    text: str


@dataclass(frozen=True)
class FittedPrompt:
    ids: list[int]  # exactly what the engine is given
    text: str  # the decoding of `ids`: what is shown as "the prompt sent"
    source_tokens: int  # tokens in the text before fitting
    action: str  # "as typed", "trimmed" or "repeated"


@lru_cache(maxsize=1)
def examples() -> tuple[Example, ...]:
    """The ready examples (translation, summarisation, code, chat) from assets/prompts.json."""
    data = json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))
    return tuple(Example(e["key"], e["label"], e["text"]) for e in data["examples"])


def example(key: str) -> Example:
    for ex in examples():
        if ex.key == key:
            return ex
    raise KeyError(f"no example prompt called {key!r}; known: {[e.key for e in examples()]}")


def fit_prompt_to_tokens(tokenizer, text: str, n_tokens: int | None) -> FittedPrompt:
    """Token ids of `text`, trimmed from the end or repeated (joined by a blank line) to exactly n_tokens.

    n_tokens None or 0 means "as typed": the text's own tokens are returned unchanged.
    Raises ValueError for an empty text (nothing to fill from) or a negative n_tokens.
    """
    if not text or not text.strip():
        raise ValueError("the prompt is empty: type some text or pick an example")
    if n_tokens is not None and n_tokens < 0:
        raise ValueError(f"the prompt length must be positive (got {n_tokens})")
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    source = len(ids)
    if not n_tokens:
        return FittedPrompt(ids, text, source, "as typed")
    if source >= n_tokens:
        kept = ids[:n_tokens]
        action = "as typed" if source == n_tokens else "trimmed"
    else:
        # repeat the text (not the ids) so each repeat tokenises naturally, then trim to N
        repeat = list(tokenizer.encode(FILL_SEPARATOR + text, add_special_tokens=False))
        kept = list(ids)
        while len(kept) < n_tokens:
            kept.extend(repeat)
        kept = kept[:n_tokens]
        action = "repeated"
    return FittedPrompt(kept, tokenizer.decode(kept), source, action)


def describe_fit(fit: FittedPrompt) -> str:
    """One line for the sidebar: how many tokens are sent and how they were made."""
    n = len(fit.ids)
    if fit.action == "trimmed":
        return f"**{n} tokens** sent (the text's first {n} of {fit.source_tokens})"
    if fit.action == "repeated":
        return f"**{n} tokens** sent (the text's {fit.source_tokens} tokens repeated to fill)"
    return f"**{n} tokens** sent (exactly as typed)"
