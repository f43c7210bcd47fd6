"""Model configuration: the few numbers that decide shapes, FLOPs and KV-cache bytes.

One frozen dataclass covers GPT-2 and Llama-family models; `from_hf_config` reads a Hugging Face
config. Parameter counts live here and nowhere else. References: GPT-2 (Radford et al. 2019),
Llama (Touvron et al. 2023), gpt-fast's ModelArgs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from engine.errors import EngineError

SUPPORTED_ARCHITECTURES = ("gpt2", "llama")


# bytes per element by dtype name: torch-free, so engine.perfmodel (pure arithmetic) can read configs without torch
DTYPE_BYTES = {"float64": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1}


def dtype_bytes(dtype) -> int:
    """Bytes per element of a dtype given as a torch.dtype or by name ('float32', 'bfloat16', ...)."""
    if not isinstance(dtype, str):
        if isinstance(getattr(dtype, "itemsize", None), int):  # a torch.dtype knows its own size
            return dtype.itemsize
        dtype = str(dtype)
    size = DTYPE_BYTES.get(dtype.removeprefix("torch."))
    if size is None:
        raise EngineError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return size


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

    # --- parameter counts: the one place they are computed ------------------------------------------
    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies through in the blocks (attention + MLP matrices, no biases)."""
        C, F, D = self.d_model, self.d_ff, self.head_dim
        attn = C * (self.n_heads * D) + 2 * C * (self.n_kv_heads * D) + (self.n_heads * D) * C
        mlp = (3 if self.arch == "llama" else 2) * C * F
        return self.n_layers * (attn + mlp)

    @property
    def lm_head_params(self) -> int:
        """The LM head's V x C matrix (the same storage as the embedding when tied)."""
        return self.vocab_size * self.d_model

    @property
    def embedding_params(self) -> int:
        """Lookup tables: token embedding (+ an untied LM head counted here once more) + learned positions."""
        pos = self.max_seq_len * self.d_model if self.arch == "gpt2" else 0
        return self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2) + pos

    @property
    def small_params(self) -> int:
        """Norm weights (and LayerNorm biases) and linear biases: tiny, but counted so totals are exact."""
        C = self.d_model
        norms = self.n_layers * (4 if self.arch == "gpt2" else 2) * C + (2 if self.arch == "gpt2" else 1) * C
        biases = 0
        if self.qkv_bias:
            biases += self.n_layers * ((self.n_heads + 2 * self.n_kv_heads) * self.head_dim + C)
        if self.arch == "gpt2":
            biases += self.n_layers * (self.d_ff + C)
        return norms + biases

    @property
    def n_params(self) -> int:
        """Every distinct parameter (tied matrices once), as Hugging Face counts them."""
        return self.matmul_params + self.embedding_params + self.small_params

    def weight_bytes(self, bytes_per_weight: float) -> float:
        """Bytes of all weights stored at `bytes_per_weight` each (a decode step reads them all)."""
        return self.n_params * bytes_per_weight

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes one token adds to the KV cache of one sequence: 2 (K and V) x layers x K x D x bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes

    # --- plain data, for a Trace ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = asdict(self)
        data["eos_token_ids"] = list(self.eos_token_ids)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["eos_token_ids"] = tuple(values.get("eos_token_ids") or ())
        return cls(**values)

    @classmethod
    def from_hf_config(cls, hf) -> ModelConfig:
        """Read a transformers PretrainedConfig (GPT2Config or LlamaConfig)."""
        arch = getattr(hf, "model_type", None)
        if arch not in SUPPORTED_ARCHITECTURES:
            raise EngineError(f"model type '{arch}' is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
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
