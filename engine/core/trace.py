"""The Trace: everything one generation did and measured, as plain data with a JSON round-trip.

The CLI prints it, the dashboard draws it, benchmarks and recorded examples store it. A trace can
also come from a server measured over HTTP (`source` = "server"): then only timings and text are known.
"""
from __future__ import annotations

import base64
import functools
import json
import math
import platform
import zlib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SCHEMA_VERSION = 5  # 1: first landing (decode captures indexed [step][layer]); 2: [layer][step], config, riders;
# 3: arrays packed as {"dtype", "shape", "zlib_base64"} (float16 bytes: ~6x smaller than lists of numbers);
# 4: CPU wait (schedstat's run-queue delay) per step and in total (older files: not measured)
# 5: the threads each decode step ran with, and the thread changes' note (older files: 0, not recorded)
PACKED_KEY = "zlib_base64"


@dataclass
class DecodeStep:
    seconds: float  # the gap before this token: one decode forward pass + sampling (+ stall_seconds)
    kv_length: int  # tokens in this sequence's KV cache after this step
    kv_bytes: int  # bytes of the KV cache in use after this step (every sequence of the step's batch)
    riders: int = 1  # sequences that shared this decode step (continuous batching: other requests too)
    stall_seconds: float = 0.0  # part of `seconds` spent on other requests' prefills run in between
    cpu_wait_seconds: float = 0.0  # part of `seconds` the engine's threads were runnable but had no CPU (longest
    # waiting thread; engine/host/cpu_wait.py); 0 where not measured (see Trace.cpu_wait_seconds)
    threads: int = 0  # CPU threads this step ran with (engine/host/thread_governor.py); 0: not recorded (GPU, older files)


@dataclass
class AttentionCapture:
    """Attention probabilities from the explicit softmax path, first sequence of the batch, float16.

    prefill[i] is (H, T, T) for layer layers[i]; decode[i][s] is (H, T+s+1): decode step s's row
    in that layer. Layers can be captured later, on demand, and merged in.
    """
    layers: list[int]
    prefill: list = field(default_factory=list)
    decode: list = field(default_factory=list)

    def index(self, layer: int) -> int | None:
        return self.layers.index(layer) if layer in self.layers else None

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in self.prefill) + sum(r.nbytes for rows in self.decode for r in rows)

    def merged(self, other: AttentionCapture, keep: list[int] | None = None) -> AttentionCapture:
        """This capture plus `other`'s layers (other wins on overlap), restricted to `keep` when given."""
        parts = {l: (p, d) for l, p, d in zip(self.layers, self.prefill, self.decode)}
        parts.update({l: (p, d) for l, p, d in zip(other.layers, other.prefill, other.decode)})
        layers = sorted(l for l in parts if keep is None or l in keep)
        return AttentionCapture(layers, [parts[l][0] for l in layers], [parts[l][1] for l in layers])


@dataclass
class Trace:
    model: str
    device: str
    dtype: str
    prompt_ids: list[int]
    output_ids: list[int]  # generated tokens only (first sequence)
    text: str  # generated text, special tokens removed
    prefill_seconds: float  # TTFT without tokenisation or queueing: prefill pass + first sampling
    steps: list[DecodeStep]  # one per decode step (output tokens after the first)
    env: dict
    prompt_tokens: list[str] = field(default_factory=list)  # readable piece of each prompt token
    output_tokens: list[str] = field(default_factory=list)  # readable piece of each output token
    prompt_text: str = ""
    batch_size: int = 1
    batch_output_ids: list[list[int]] | None = None  # every sequence's output when batch_size > 1
    warmup_seconds: float = 0.0  # one-time warm-up before timing (belongs to neither phase)
    capture_seconds: float = 0.0  # extra time the attention capture cost (0 when off)
    queue_seconds: float = 0.0  # waiting for the model before this request started (vLLM: request queue time)
    kv_bytes_per_token: int = 0  # per sequence: 2 x layers x kv_heads x head_dim x dtype bytes
    weight_bytes: int = 0
    n_params: int = 0
    stop_reason: str = "length"  # "length", "eos", "stop" or "cancelled"
    settings: dict = field(default_factory=dict)  # sampling, chat, scheduler mode, kernels, ...
    config: dict | None = None  # the model's ModelConfig fields (pages read shapes here, never guess them)
    attention: AttentionCapture | None = None
    kv_key_norms: list | None = None  # (layers, kv_heads, tokens) L2 norm of each cached key
    kv_value_norms: list | None = None
    # the time other programs took the CPU from this run (engine/host/cpu_wait.py): None = not measured
    prefill_cpu_wait_seconds: float = 0.0  # during prefill (longest waiting thread)
    cpu_wait_seconds: float | None = None  # prefill + every decode step (longest waiting thread of each)
    cpu_wait_all_threads_seconds: float | None = None  # the same intervals, every thread's wait added up
    cpu_wait_note: str = ""  # why it was not measured (no schedstat on this system), else ""
    cpu_wait_read_seconds: float = 0.0  # what reading schedstat cost, outside every timed interval
    threads_note: str = ""  # the decode loop's thread changes and why (engine/host/thread_governor.py), else ""
    source: str = "local"  # "local" (this engine) or "server" (measured over HTTP, see engine.serving.client.openai_client)
    schema_version: int = SCHEMA_VERSION

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

    @property
    def decode_cpu_wait_seconds(self) -> float:
        return sum(s.cpu_wait_seconds for s in self.steps)

    @property
    def model_config(self):
        """The ModelConfig this trace was made with, or None (a server's trace)."""
        from engine.core.config import ModelConfig

        return ModelConfig.from_dict(self.config) if self.config else None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), default=_plain, **kwargs)

    @classmethod
    def from_dict(cls, data: dict) -> Trace:
        """Rebuild a trace from `to_dict` output (arrays as float16); see engine.core.trace_file for checks."""
        data = dict(data)
        version = data.get("schema_version", 1)
        data["schema_version"] = SCHEMA_VERSION
        data["steps"] = [DecodeStep(**s) for s in data.get("steps", [])]
        att = data.get("attention")
        if att is not None:
            decode = att["decode"]
            if version == 1:  # [step][layer] -> [layer][step]
                decode = [list(rows) for rows in zip(*decode)] if decode else [[] for _ in att["layers"]]
            data["attention"] = AttentionCapture(
                layers=list(att["layers"]),
                prefill=[unpack_array(m) for m in att["prefill"]],
                decode=[[unpack_array(r) for r in rows] for rows in decode],
            )
        for key in ("kv_key_norms", "kv_value_norms"):
            if data.get(key) is not None:
                data[key] = unpack_array(data[key])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))


def environment(device: torch.device) -> dict:
    import torch  # here only: the dashboard's process reads Traces without importing torch (~2 s of its start)

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
        info["device_name"] = cpu_name()
    return info


@functools.cache
def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), read once per process; "CPU" where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or "CPU"
    except OSError:
        pass
    return "CPU"


def pack_array(array: np.ndarray) -> dict:
    """A float16 array as JSON: its shape and its little-endian bytes, zlib-compressed and base64-encoded."""
    raw = np.ascontiguousarray(array, dtype="<f2").tobytes()
    return {"dtype": "float16", "shape": list(array.shape), PACKED_KEY: base64.b64encode(zlib.compress(raw, 6)).decode("ascii")}


def unpack_array(value) -> np.ndarray:
    """`pack_array`'s output (schema 3), or nested lists of numbers (schemas 1-2), as a float16 array.

    Raises ValueError when the bytes do not match the declared shape (never unpacks more than it declares)."""
    if not isinstance(value, dict):
        with np.errstate(over="ignore"):  # a number beyond float16 becomes inf, which the checks then refuse
            return np.asarray(value, dtype=np.float16)
    shape = value.get("shape")
    if value.get("dtype") != "float16" or not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ValueError("a packed array needs dtype 'float16' and a shape of non-negative integers")
    expected = 2 * math.prod(shape)
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(base64.b64decode(str(value.get(PACKED_KEY, "")), validate=True), expected + 1)
    except zlib.error as exc:
        raise ValueError(f"a packed array's bytes are damaged ({exc})") from None
    if len(raw) != expected or not inflate.eof:
        raise ValueError(f"a packed array holds a different number of values than its shape {shape} says")
    return np.frombuffer(raw, dtype="<f2").astype(np.float16).reshape(shape)


def _plain(value):
    """JSON fallback for numpy arrays (packed float16) and numpy scalars inside a trace."""
    if isinstance(value, np.ndarray):
        return pack_array(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot put {type(value).__name__} into JSON")
