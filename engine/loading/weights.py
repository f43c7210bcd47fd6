"""Map a Hugging Face state dict onto our Transformer, key by key, with a shape check on each.

GPT-2 stores its linear layers as `Conv1D`, whose weight is (in, out) — the transpose of
`nn.Linear`'s (out, in) — so every GPT-2 matrix is transposed here, once. Llama's separate
q/k/v and gate/up projections are concatenated into our fused `qkv` and `gate_up` matmuls.
"""
from __future__ import annotations

import torch

from engine.core.config import ModelConfig

# our key (per layer, "{i}" = block index) -> list of HF keys concatenated along dim 0, transpose?
GPT2_LAYER_KEYS = {
    "attn_norm.weight": (["transformer.h.{i}.ln_1.weight"], False),
    "attn_norm.bias": (["transformer.h.{i}.ln_1.bias"], False),
    "attn.qkv.weight": (["transformer.h.{i}.attn.c_attn.weight"], True),
    "attn.qkv.bias": (["transformer.h.{i}.attn.c_attn.bias"], False),
    "attn.out.weight": (["transformer.h.{i}.attn.c_proj.weight"], True),
    "attn.out.bias": (["transformer.h.{i}.attn.c_proj.bias"], False),
    "mlp_norm.weight": (["transformer.h.{i}.ln_2.weight"], False),
    "mlp_norm.bias": (["transformer.h.{i}.ln_2.bias"], False),
    "mlp.fc.weight": (["transformer.h.{i}.mlp.c_fc.weight"], True),
    "mlp.fc.bias": (["transformer.h.{i}.mlp.c_fc.bias"], False),
    "mlp.proj.weight": (["transformer.h.{i}.mlp.c_proj.weight"], True),
    "mlp.proj.bias": (["transformer.h.{i}.mlp.c_proj.bias"], False),
}
GPT2_TOP_KEYS = {
    "tok_emb.weight": "transformer.wte.weight",
    "pos_emb.weight": "transformer.wpe.weight",
    "final_norm.weight": "transformer.ln_f.weight",
    "final_norm.bias": "transformer.ln_f.bias",
}

_ATTN = "model.layers.{i}.self_attn."
LLAMA_LAYER_KEYS = {
    "attn_norm.weight": (["model.layers.{i}.input_layernorm.weight"], False),
    "attn.qkv.weight": ([_ATTN + "q_proj.weight", _ATTN + "k_proj.weight", _ATTN + "v_proj.weight"], False),
    "attn.qkv.bias": ([_ATTN + "q_proj.bias", _ATTN + "k_proj.bias", _ATTN + "v_proj.bias"], False),
    "attn.out.weight": ([_ATTN + "o_proj.weight"], False),
    "attn.out.bias": ([_ATTN + "o_proj.bias"], False),
    "mlp_norm.weight": (["model.layers.{i}.post_attention_layernorm.weight"], False),
    "mlp.gate_up.weight": (["model.layers.{i}.mlp.gate_proj.weight", "model.layers.{i}.mlp.up_proj.weight"], False),
    "mlp.down.weight": (["model.layers.{i}.mlp.down_proj.weight"], False),
}
LLAMA_TOP_KEYS = {
    "tok_emb.weight": "model.embed_tokens.weight",
    "final_norm.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}


def map_hf_state_dict(cfg: ModelConfig, hf: dict[str, torch.Tensor],
                      expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Build our state dict from `hf`; `expected` (our model's own state dict) gives every shape."""
    layer_keys, top_keys = (GPT2_LAYER_KEYS, GPT2_TOP_KEYS) if cfg.arch == "gpt2" else (LLAMA_LAYER_KEYS, LLAMA_TOP_KEYS)
    hf = {k.removeprefix("_orig_mod."): v for k, v in hf.items()}
    if cfg.arch == "gpt2" and not any(k.startswith("transformer.") for k in hf):
        hf = {"transformer." + k if not k.startswith("lm_head") else k: v for k, v in hf.items()}
    out: dict[str, torch.Tensor] = {}
    for ours, theirs in top_keys.items():
        if ours in expected and theirs in hf:
            out[ours] = hf[theirs]
    for i in range(cfg.n_layers):
        for ours, (theirs, transpose) in layer_keys.items():
            key = f"blocks.{i}.{ours}"
            if key not in expected:
                continue  # e.g. no qkv bias in this Llama
            parts = [hf[t.format(i=i)] for t in theirs]
            tensor = torch.cat([p.t() if transpose else p for p in parts], dim=0)
            out[key] = tensor
    if "lm_head.weight" in expected and "lm_head.weight" not in out:
        out["lm_head.weight"] = out["tok_emb.weight"]  # tied: the same matrix
    for key, want in expected.items():
        got = out.get(key)
        assert got is not None, f"no weight for {key}"
        assert tuple(got.shape) == tuple(want.shape), f"{key}: checkpoint {tuple(got.shape)} vs model {tuple(want.shape)}"
    return out


def load_into(model: torch.nn.Module, hf_state_dict: dict[str, torch.Tensor], assign: bool = False) -> None:
    """Copy the mapped weights into `model`, or with assign=True make them its parameters (meta-built models)."""
    expected = model.state_dict()
    model.load_state_dict(map_hf_state_dict(model.cfg, hf_state_dict, expected), strict=True, assign=assign)
