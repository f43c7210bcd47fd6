"""One model, many spellings: HuggingFaceTB/SmolLM2-135M-Instruct, smollm2-135m-instruct and the bundled model's
short name are one model; openai-community/gpt2 is gpt2 (the names of engine/loading/model_store.py).

Used to decide whether a server runs the same model as the local engine, so that prompt token ids mean the same
text on both sides. Streamlit-free.
"""
from __future__ import annotations

from engine.loading.model_store import ALIASES, HF_IDS


def canonical(name: str) -> str:
    """`name` as the local engine spells it (its short name), whichever way the server spells it."""
    key = str(name).strip().lower().rstrip("/")
    by_id = {hf.lower(): short for short, hf in HF_IDS.items()}
    for candidate in (key, key.rsplit("/", 1)[-1]):
        if candidate in by_id:
            return by_id[candidate]
        if candidate in ALIASES or candidate in HF_IDS:
            return ALIASES.get(candidate, candidate)
    return key.rsplit("/", 1)[-1]


def same_model(remote: str, local: str) -> bool:
    return canonical(remote) == canonical(local)
