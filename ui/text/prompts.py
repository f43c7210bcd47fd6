"""Example prompts, and fitting a prompt to exactly N tokens so prompt length is a controlled variable.

Prompt length is what sets the cost of the valley (prefill), so the sidebar lets the class choose it
in tokens. `fit_prompt_to_tokens` (engine/core/prompting.py, so the CLI fits prompts the same way) trims
the tokenised text from the end, or repeats it, until it has exactly N tokens.
Streamlit-free.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.core.prompting import FittedPrompt, fit_prompt_to_tokens  # noqa: F401 (the sidebar's fitting, in the engine)

PROMPTS_FILE = Path(__file__).resolve().parents[2] / "assets" / "prompts.json"
PROMPT_TOKENS_MAX, OUTPUT_TOKENS_MAX = 1024, 512  # the sidebar's ranges: prompt length N, output length (and links')


@dataclass(frozen=True)
class Example:
    key: str
    label: str
    text: str


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


def describe_fit(fit: FittedPrompt) -> str:
    """One line for the sidebar: how many tokens are sent and how they were made."""
    n = len(fit.ids)
    if fit.action == "trimmed":
        return f"**{n} tokens** sent (the text's first {n} of {fit.source_tokens})"
    if fit.action == "repeated":
        return f"**{n} tokens** sent (the text's {fit.source_tokens} tokens repeated to fill)"
    return f"**{n} tokens** sent (exactly as typed)"
