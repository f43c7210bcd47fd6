"""Tiny random-weight GPT-2 and Llama checkpoints, built offline in a second, for tests and demos.

They have the real architectures (GPT-2: LayerNorm, learned positions, GELU, Conv1D weights;
Llama: RoPE, RMSNorm, SwiGLU, grouped-query attention) and a small byte-level BPE tokenizer
trained here on a paragraph, so everything runs without a network or the bundled model.
"""
from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import torch

from engine.loading import cache_folder

_CORPUS = (
    "Two bends on the old post road: the wide valley at Longmen Bay where the whole convoy rides "
    "side by side, and the single-plank bridge where riders cross one at a time. Prefill reads the "
    "prompt in one parallel pass; decode writes one token per step and reads the KV cache each time. "
    "def add(a, b):\n    return a + b\n<p>Bonjour le monde! 你好，世界 🙂</p>"
)


TINY_CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"


def tiny_tokenizer():
    """A fresh copy each call (callers may set attributes); trained only once per process."""
    return copy.deepcopy(_trained_tokenizer())


@lru_cache(maxsize=1)
def _trained_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from engine.loading.tokenizer_file import PlainTokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([_CORPUS] * 4, trainer)
    return PlainTokenizer(tok, {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}, TINY_CHAT_TEMPLATE)


def tiny_hf_model(arch: str = "llama", seed: int = 0, vocab_size: int = 512):
    """A transformers model with random weights: the reference our forward pass is checked against.

    arch "smollm2" is not tiny: SmolLM2-135M's exact shapes with random weights, for timing where the real
    weights cannot go (a lent GPU machine has no network and the bundled file is too big to carry)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    if arch == "smollm2":
        cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                          num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                          rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1,
                          eos_token_id=2)
        return LlamaForCausalLM(cfg).eval()
    if arch == "gpt2":
        cfg = GPT2Config(vocab_size=vocab_size, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                         bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(cfg).eval()
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def tiny_weights(arch: str, cache: Path) -> tuple[object, dict[str, torch.Tensor]]:
    """(config, state dict) of tiny_hf_model(arch), built with transformers once per machine and then read back from
    the model cache (`cache`), so a process that only runs a tiny model (a test's worker, a dashboard's engine) imports no
    transformers (~2.5 s of CPU each). The folder's name holds torch's and transformers' versions: another version
    may draw other random weights, and then builds its own copy. An unwritable cache builds in memory each time."""
    if arch == "smollm2":  # 135M random weights: half a gigabyte on disk for a model built only on a GPU machine
        model = tiny_hf_model(arch)
        return model.config, model.state_dict()
    from importlib.metadata import version

    folder = cache / f"tiny-{arch}-torch{torch.__version__}-transformers{version('transformers')}"
    if not cache_folder.complete(folder):
        model = tiny_hf_model(arch)
        try:
            cache_folder.write_folder(folder, lambda tmp: cache_folder.save_weights(model, tmp, model.config.to_dict()))
        except OSError:
            return model.config, model.state_dict()
    return cache_folder.read_weights(folder)
