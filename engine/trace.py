"""The Trace: everything one generation did and measured, as plain data with a JSON round-trip.

The CLI prints it, the dashboard draws it, benchmarks and recorded examples store it.
"""
from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field

import numpy as np
import torch


@dataclass
class DecodeStep:
    seconds: float  # this token's latency: one decode forward pass + sampling (UI callbacks excluded)
    kv_length: int  # tokens in the KV cache after this step
    kv_bytes: int  # bytes of the KV cache in use after this step (whole batch)


@dataclass
class AttentionCapture:
    """Attention probabilities from the explicit softmax path, first sequence of the batch.

    prefill[l] is (H, T, T) for layer layers[l]; decode[s][l] is (H, T+s+1): step s's row.
    """
    layers: list[int]
    prefill: list = field(default_factory=list)
    decode: list = field(default_factory=list)


@dataclass
class Trace:
    model: str
    device: str
    dtype: str
    prompt_ids: list[int]
    output_ids: list[int]  # generated tokens only (first sequence)
    text: str  # generated text, special tokens removed
    prefill_seconds: float  # TTFT without tokenisation: prefill pass + first sampling
    steps: list[DecodeStep]  # one per decode step (output tokens after the first)
    env: dict
    prompt_tokens: list[str] = field(default_factory=list)  # readable piece of each prompt token
    output_tokens: list[str] = field(default_factory=list)  # readable piece of each output token
    prompt_text: str = ""
    batch_size: int = 1
    batch_output_ids: list[list[int]] | None = None  # every sequence's output when batch_size > 1
    warmup_seconds: float = 0.0  # one-time warm-up before timing (belongs to neither phase)
    capture_seconds: float = 0.0  # extra time the attention capture cost (0 when off)
    kv_bytes_per_token: int = 0  # per sequence: 2 x layers x kv_heads x head_dim x dtype bytes
    weight_bytes: int = 0
    n_params: int = 0
    stop_reason: str = "length"  # "length" or "eos"
    settings: dict = field(default_factory=dict)  # temperature, top_k, top_p, seed, chat, ...
    attention: AttentionCapture | None = None
    kv_key_norms: list | None = None  # (layers, kv_heads, tokens) L2 norm of each cached key
    kv_value_norms: list | None = None

    @property
    def n_prompt(self) -> int:
        return len(self.prompt_ids)

    @property
    def n_output(self) -> int:
        return len(self.output_ids)

    @property
    def decode_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def total_seconds(self) -> float:
        return self.prefill_seconds + self.decode_seconds

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), default=_plain, **kwargs)

    @classmethod
    def from_dict(cls, data: dict) -> Trace:
        data = dict(data)
        data["steps"] = [DecodeStep(**s) for s in data.get("steps", [])]
        att = data.get("attention")
        if att is not None:
            data["attention"] = AttentionCapture(
                layers=list(att["layers"]),
                prefill=[np.asarray(m, dtype=np.float16) for m in att["prefill"]],
                decode=[[np.asarray(r, dtype=np.float16) for r in step] for step in att["decode"]],
            )
        for key in ("kv_key_norms", "kv_value_norms"):
            if data.get(key) is not None:
                data[key] = np.asarray(data[key], dtype=np.float16)
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))


def environment(device: torch.device) -> dict:
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "device_name": "CPU",
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    elif device.type == "mps":
        info["device_name"] = "Apple GPU (MPS)"
    else:
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    info["device_name"] = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
    return info


def _plain(value):
    """JSON fallback for numpy arrays and scalars inside a trace."""
    if isinstance(value, np.ndarray):
        return np.round(value.astype(np.float32), 5).tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot put {type(value).__name__} into JSON")
