"""Model configuration: the few numbers that decide shapes, FLOPs and KV-cache bytes.

One frozen dataclass covers GPT-2 and Llama-family models; `from_hf_config` reads a Hugging Face
config. References: GPT-2 (Radford et al. 2019), Llama (Touvron et al. 2023), gpt-fast's ModelArgs.
"""
from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_ARCHITECTURES = ("gpt2", "llama")


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # "gpt2" or "llama": picks norm, positions, MLP and weight key table
    vocab_size: int  # rows of the embedding and of the LM head (the biggest single matmul in decode)
    n_layers: int  # blocks; KV-cache bytes grow linearly with it
    d_model: int  # hidden size C; weight bytes grow with C^2
    n_heads: int  # query heads H
    n_kv_heads: int  # key/value heads K (K < H is grouped-query attention: a smaller KV cache)
    head_dim: int  # D = C / H; one KV entry is K * D numbers per layer
    d_ff: int  # MLP inner width
    max_seq_len: int  # context window: prompt + generated tokens may not exceed it
    norm_eps: float  # epsilon of LayerNorm / RMSNorm
    rope_theta: float = 10000.0  # rotary base (Llama only)
    tie_embeddings: bool = True  # LM head shares the token-embedding matrix
    qkv_bias: bool = False  # GPT-2 has biases on every linear; Llama has none
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()  # generation stops on any of these

    @property
    def uses_rope(self) -> bool:
        return self.arch == "llama"

    @property
    def n_params(self) -> int:
        """Parameter count (tied embeddings counted once), for FLOP and byte estimates."""
        C, F, D = self.d_model, self.d_ff, self.head_dim
        attn = C * (self.n_heads * D) + 2 * C * (self.n_kv_heads * D) + (self.n_heads * D) * C
        mlp = (3 if self.arch == "llama" else 2) * C * F
        embed = self.vocab_size * C * (1 if self.tie_embeddings else 2)
        pos = self.max_seq_len * C if self.arch == "gpt2" else 0
        return self.n_layers * (attn + mlp) + embed + pos

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes one token adds to the KV cache of one sequence: 2 (K and V) x layers x K x D x bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes

    @classmethod
    def from_hf_config(cls, hf) -> ModelConfig:
        """Read a transformers PretrainedConfig (GPT2Config or LlamaConfig)."""
        arch = getattr(hf, "model_type", None)
        if arch not in SUPPORTED_ARCHITECTURES:
            from engine.errors import EngineError

            raise EngineError(
                f"model type '{arch}' is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        eos = hf.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
        if arch == "gpt2":
            C, H = hf.n_embd, hf.n_head
            return cls(
                arch="gpt2", vocab_size=hf.vocab_size, n_layers=hf.n_layer, d_model=C,
                n_heads=H, n_kv_heads=H, head_dim=C // H, d_ff=hf.n_inner or 4 * C,
                max_seq_len=hf.n_positions, norm_eps=hf.layer_norm_epsilon,
                tie_embeddings=True, qkv_bias=True, bos_token_id=hf.bos_token_id,
                eos_token_ids=eos_ids,
            )
        rope = getattr(hf, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))
        if rope.get("rope_type", "default") != "default":
            from engine.errors import EngineError

            raise EngineError(f"rope scaling '{rope.get('rope_type')}' is not supported")
        head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
        return cls(
            arch="llama", vocab_size=hf.vocab_size, n_layers=hf.num_hidden_layers,
            d_model=hf.hidden_size, n_heads=hf.num_attention_heads,
            n_kv_heads=hf.num_key_value_heads or hf.num_attention_heads, head_dim=head_dim,
            d_ff=hf.intermediate_size, max_seq_len=hf.max_position_embeddings,
            norm_eps=hf.rms_norm_eps, rope_theta=float(theta),
            tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
            qkv_bias=bool(getattr(hf, "attention_bias", False)),
            bos_token_id=hf.bos_token_id, eos_token_ids=eos_ids,
        )
