"""The models a plan can be made for, by the key the CLI takes: shapes from each model's published config.json.

Only the shapes matter here (layers, widths, heads, KV heads, vocabulary): FLOPs, weight bytes and KV bytes per token
follow from them (engine/core/config.py counts parameters, engine/perfmodel/flops.py counts work). Sources: the
config.json of each model on the Hugging Face Hub (HuggingFaceTB/SmolLM2-135M, openai-community/gpt2,
meta-llama/Llama-2-7b-hf, -13b-hf, -70b-hf, meta-llama/Llama-3.1-8B, meta-llama/Llama-3.2-1B,
mistralai/Mistral-7B-v0.1, EleutherAI/gpt-j-6b).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.config import ModelConfig
from engine.errors import EngineError


def llama(n_layers, d_model, n_heads, n_kv_heads, d_ff, vocab, ctx, tied=False) -> ModelConfig:
    return ModelConfig(arch="llama", vocab_size=vocab, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       n_kv_heads=n_kv_heads, head_dim=d_model // n_heads, d_ff=d_ff, max_seq_len=ctx,
                       norm_eps=1e-5, tie_embeddings=tied)


def gpt2(n_layers, d_model, n_heads, vocab=50257, ctx=1024, d_ff=None, tied=True) -> ModelConfig:
    return ModelConfig(arch="gpt2", vocab_size=vocab, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       n_kv_heads=n_heads, head_dim=d_model // n_heads, d_ff=d_ff or 4 * d_model, max_seq_len=ctx,
                       norm_eps=1e-5, tie_embeddings=tied, qkv_bias=True)


@dataclass(frozen=True)
class ModelShape:
    key: str  # what `python -m engine plan --model` takes
    name: str  # what the pages show
    config: ModelConfig
    note: str = ""


MODELS: dict[str, ModelShape] = {m.key: m for m in [
    ModelShape("SmolLM2-135M".lower(), "SmolLM2-135M", llama(30, 576, 9, 3, 1536, 49152, 8192, tied=True),
               "the model this dashboard runs (its alias is engine/loading/model_store.py's to name)"),
    ModelShape("gpt2", "GPT-2 124M", gpt2(12, 768, 12)),
    ModelShape("gpt2-medium", "GPT-2 355M", gpt2(24, 1024, 16)),
    ModelShape("gpt2-large", "GPT-2 774M", gpt2(36, 1280, 20)),
    ModelShape("gpt2-xl", "GPT-2 1.5B", gpt2(48, 1600, 25)),
    ModelShape("llama-3.2-1b", "Llama-3.2 1B (GQA, 8 KV heads)", llama(16, 2048, 32, 8, 8192, 128256, 131072, tied=True)),
    ModelShape("gpt-j-6b", "GPT-J 6B", gpt2(28, 4096, 16, vocab=50400, ctx=2048, d_ff=16384, tied=False),
               "rotary positions and parallel attention + MLP: counted as GPT-2-shaped blocks (same matrices)"),
    ModelShape("llama-2-7b", "Llama-2 7B (MHA, 32 KV heads)", llama(32, 4096, 32, 32, 11008, 32000, 4096)),
    ModelShape("mistral-7b", "Mistral 7B (GQA, 8 KV heads)", llama(32, 4096, 32, 8, 14336, 32000, 32768),
               "v0.1's 4,096-token sliding window is not modelled: the cache is counted to the full context"),
    ModelShape("llama-3.1-8b", "Llama-3.1 8B (GQA, 8 KV heads)", llama(32, 4096, 32, 8, 14336, 128256, 131072)),
    ModelShape("llama-2-13b", "Llama-2 13B (MHA, 40 KV heads)", llama(40, 5120, 40, 40, 13824, 32000, 4096)),
    ModelShape("llama-2-70b", "Llama-2 70B (GQA, 8 KV heads)", llama(80, 8192, 64, 8, 28672, 32000, 4096)),
]}


def model_shape(key: str) -> ModelShape:
    """The model by its CLI key (case-insensitive) or its display name; one clear line listing the keys otherwise."""
    found = MODELS.get(key.lower()) or next((m for m in MODELS.values() if m.name == key), None)
    if found is None:
        raise EngineError(f"unknown model '{key}'; valid: {', '.join(MODELS)}")
    return found
