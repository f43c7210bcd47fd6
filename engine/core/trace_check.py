"""Checks a recorded trace must pass before anything draws it: every field's type, range and shape.

A trace file may come from anywhere (a student's laptop, a GPU server, an editor), so nothing in it is
trusted: `check_fields` runs on the parsed JSON before a Trace is built (types, finite non-negative
timings, schema version, declared array shapes, so nothing large is unpacked blindly) and
`check_arrays` on the built Trace (the arrays' real shapes against its token counts and model config, and their
values: attention probabilities from 0 to 1, cache norms finite and not negative).
Each failure is one plain sentence naming the field, raised as ValueError for engine.core.trace_file.
"""
from __future__ import annotations

import math
import re
from dataclasses import fields

import numpy as np

from engine.core.trace import PACKED_KEY, SCHEMA_VERSION, Trace

OLDEST_SCHEMA = 1
PROBABILITY_MAX = 1.001  # float16 rounds a softmax's largest values up to 1.0 at most; a little slack for other writers
MAX_UNPACKED_BYTES = 256 * 2**20  # attention + cache pictures once unpacked (a dashboard run keeps ~8 MB)
REQUIRED = ("schema_version", "model", "device", "dtype", "prompt_ids", "output_ids", "text", "prefill_seconds",
            "steps", "env")
STEP_FIELDS = {"seconds", "kv_length", "kv_bytes", "riders", "stall_seconds", "cpu_wait_seconds", "threads"}
SECONDS = ("prefill_seconds", "warmup_seconds", "capture_seconds", "queue_seconds", "prefill_cpu_wait_seconds",
           "cpu_wait_read_seconds")
MAYBE_SECONDS = ("cpu_wait_seconds", "cpu_wait_all_threads_seconds")  # null: not measured
COUNTS = ("kv_bytes_per_token", "weight_bytes", "n_params")
TEXTS = ("model", "device", "dtype", "text", "prompt_text", "stop_reason", "source", "cpu_wait_note", "threads_note")
# names pages print inside Markdown: plain characters only, so a file cannot smuggle links, images or HTML in
NAMES = ("model", "device", "dtype", "stop_reason")
PLAIN_NAME = re.compile(r"[\w .,:;/@()+=%'?&#~-]{0,200}")
PLAIN_NOTE = re.compile(r"[\w .,:;/@()+=%'?&#~-]{0,400}")  # cpu_wait_note: a sentence, same characters


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(data: dict, key: str, where: str = "") -> None:
    value = data[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"field '{where}{key}' must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"field '{where}{key}' must be a finite number of seconds ≥ 0 (found {value})")


def _count(data: dict, key: str, where: str = "", low: int = 0) -> None:
    value = data[key]
    if not _is_int(value) or value < low:
        raise ValueError(f"field '{where}{key}' must be a whole number ≥ {low} (found {value!r})")


def _int_list(value, key: str) -> None:
    if not isinstance(value, list) or not all(_is_int(v) and v >= -1 for v in value):
        raise ValueError(f"field '{key}' must be a list of token ids (whole numbers ≥ 0, or -1 for an id not known)")


def _str_list(value, key: str, length: int) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"field '{key}' must be a list of strings")
    if value and len(value) != length:
        raise ValueError(f"field '{key}' has {len(value)} entries for {length} tokens")


def _lone_surrogate(value, where: str) -> str | None:
    """Where the first string that is not Unicode text sits ("field 'text'", "a key in field 'env'"), or None.
    JSON may escape a lone surrogate ("\\ud800"), and a page that draws one fails. Lists of numbers pass quickly."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"field '{where}'"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if _lone_surrogate(key, ""):
                return f"a key in field '{where}'" if where else "a key"
            found = _lone_surrogate(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, (str, dict, list)):
                found = _lone_surrogate(item, f"{where}[{i}]")
                if found:
                    return found
    return None


def check_fields(data) -> None:
    """The parsed JSON of a trace file: a trace object of a known schema, with sane types and values."""
    if isinstance(data, list):
        raise ValueError("it holds a JSON list, not a trace object")
    if not isinstance(data, dict):
        raise ValueError(f"it holds a JSON {type(data).__name__}, not a trace object")
    bad = _lone_surrogate(data, "")
    if bad:
        raise ValueError(f"{bad} is not valid Unicode text (it holds a lone surrogate such as \\ud800)")
    if "schema_version" not in data:
        raise ValueError("it is not a Two Bends trace (no 'schema_version' field)")
    version = data["schema_version"]
    if not _is_int(version) or version < OLDEST_SCHEMA:
        raise ValueError(f"field 'schema_version' must be a whole number ≥ {OLDEST_SCHEMA} (found {version!r})")
    if version > SCHEMA_VERSION:
        raise ValueError(f"it was written by a newer Two Bends (trace schema {version}; this version reads schemas "
                         f"{OLDEST_SCHEMA} to {SCHEMA_VERSION}): update the dashboard to open it")
    known = {f.name for f in fields(Trace)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"field '{unknown[0]}' is not part of trace schema {version}")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ValueError(f"field '{missing[0]}' is missing")
    for key in TEXTS:
        if key in data and not isinstance(data[key], str):
            raise ValueError(f"field '{key}' must be a string, not {type(data[key]).__name__}")
    for key in NAMES:
        if key in data and not PLAIN_NAME.fullmatch(data[key]):
            raise ValueError(f"field '{key}' has characters a {key.replace('_', ' ')} never has")
    for note in ("cpu_wait_note", "threads_note"):
        if not PLAIN_NOTE.fullmatch(data.get(note, "")):
            raise ValueError(f"field '{note}' has characters such a note never has")
    if not PLAIN_NAME.fullmatch(str(data["env"].get("device_name", "")) if isinstance(data["env"], dict) else ""):
        raise ValueError("field 'env.device_name' has characters a device name never has")
    if data.get("source", "local") not in ("local", "server"):
        raise ValueError("field 'source' must be 'local' or 'server'")
    _int_list(data["prompt_ids"], "prompt_ids")
    _int_list(data["output_ids"], "output_ids")
    n_prompt, n_output = len(data["prompt_ids"]), len(data["output_ids"])
    if n_prompt == 0:
        raise ValueError("field 'prompt_ids' is empty: a run needs at least one prompt token")
    _str_list(data.get("prompt_tokens", []), "prompt_tokens", n_prompt)
    _str_list(data.get("output_tokens", []), "output_tokens", n_output)
    for key in SECONDS:
        if key in data:
            _number(data, key)
    for key in MAYBE_SECONDS:
        if data.get(key) is not None:
            _number(data, key)
    for key in COUNTS:
        if key in data:
            _count(data, key)
    if "batch_size" in data:
        _count(data, "batch_size", low=1)
    for key in ("env", "settings"):
        if key in data and not isinstance(data[key], dict):
            raise ValueError(f"field '{key}' must be an object")
    recording = data.get("settings", {}).get("recording", {})
    if not isinstance(recording, dict) or not all(
            isinstance(v, str) and PLAIN_NAME.fullmatch(v) for v in recording.values()):
        raise ValueError("field 'settings.recording' must hold short plain strings (title, date, machine)")
    batch = data.get("batch_output_ids")
    if batch is not None and (not isinstance(batch, list) or not all(
            isinstance(ids, list) and all(_is_int(v) and v >= 0 for v in ids) for ids in batch)):
        raise ValueError("field 'batch_output_ids' must be a list of token-id lists or null")
    _check_steps(data["steps"], n_output)
    _check_config(data.get("config"))
    _check_declared_arrays(data)


def _check_steps(steps, n_output: int) -> None:
    if not isinstance(steps, list):
        raise ValueError("field 'steps' must be a list")
    if len(steps) > max(n_output - 1, 0):
        raise ValueError(f"field 'steps' has {len(steps)} decode steps for {n_output} output tokens (at most one fewer)")
    for i, step in enumerate(steps):
        where = f"steps[{i}]."
        if not isinstance(step, dict):
            raise ValueError(f"field 'steps[{i}]' must be an object")
        if set(step) - STEP_FIELDS or not {"seconds", "kv_length", "kv_bytes"} <= set(step):
            raise ValueError(f"field 'steps[{i}]' must have seconds, kv_length, kv_bytes (and optionally riders, "
                             "stall_seconds, cpu_wait_seconds, threads) only")
        _number(step, "seconds", where)
        _count(step, "kv_length", where, low=1)
        _count(step, "kv_bytes", where)
        if "riders" in step:
            _count(step, "riders", where, low=1)
        if "stall_seconds" in step:
            _number(step, "stall_seconds", where)
            if step["stall_seconds"] > step["seconds"]:
                raise ValueError(f"field '{where}stall_seconds' is longer than the step itself")
        if "cpu_wait_seconds" in step:
            _number(step, "cpu_wait_seconds", where)
        if "threads" in step:
            _count(step, "threads", where)


def _check_config(config) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise ValueError("field 'config' must be an object (the model's configuration) or null")
    for key in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "d_model", "vocab_size", "d_ff", "max_seq_len"):
        if not _is_int(config.get(key)) or config[key] < 1:
            raise ValueError(f"field 'config.{key}' must be a whole number ≥ 1")
    if config["n_heads"] % config["n_kv_heads"]:
        raise ValueError("field 'config.n_heads' must be a multiple of 'config.n_kv_heads'")
    if config.get("arch") not in ("gpt2", "llama"):
        raise ValueError("field 'config.arch' must be 'gpt2' or 'llama'")


def _declared_bytes(value, key: str) -> int:
    """float16 bytes a packed array says it holds (lists of numbers are checked after they are built)."""
    if isinstance(value, dict):
        shape = value.get("shape")
        if value.get("dtype") != "float16" or PACKED_KEY not in value or not isinstance(shape, list) or not all(
                _is_int(n) and n >= 0 for n in shape):
            raise ValueError(f"field '{key}' is not a packed float16 array")
        return 2 * math.prod(shape)
    if not isinstance(value, list):
        raise ValueError(f"field '{key}' must be an array (packed, or a list of numbers)")
    return 0


def _check_declared_arrays(data: dict) -> None:
    total = 0
    for key in ("kv_key_norms", "kv_value_norms"):
        if data.get(key) is not None:
            total += _declared_bytes(data[key], key)
    att = data.get("attention")
    if att is not None:
        if not isinstance(att, dict) or set(att) != {"layers", "prefill", "decode"}:
            raise ValueError("field 'attention' must be an object with layers, prefill and decode")
        if data.get("config") is None:
            raise ValueError("field 'attention' needs the model's 'config' to be read")
        layers = att["layers"]
        n_layers = data["config"]["n_layers"]
        if not isinstance(layers, list) or not all(_is_int(l) and 0 <= l < n_layers for l in layers) \
                or len(set(layers)) != len(layers):
            raise ValueError(f"field 'attention.layers' must list distinct layer numbers from 0 to {n_layers - 1}")
        if not isinstance(att["prefill"], list) or not isinstance(att["decode"], list) or not all(
                isinstance(rows, list) for rows in att["decode"]):
            raise ValueError("fields 'attention.prefill' and 'attention.decode' must be lists")
        total += sum(_declared_bytes(m, f"attention.prefill[{i}]") for i, m in enumerate(att["prefill"]))
        total += sum(_declared_bytes(r, f"attention.decode[{i}][{s}]")
                     for i, rows in enumerate(att["decode"]) for s, r in enumerate(rows))
    if total > MAX_UNPACKED_BYTES:
        raise ValueError(f"its arrays would take {total / 2**20:,.0f} MB once unpacked (at most "
                         f"{MAX_UNPACKED_BYTES // 2**20} MB)")


def _values(array: np.ndarray, where: str, high: float | None) -> None:
    """Every value finite and in [0, high] (no upper bound when high is None): a picture drawn from NaN or a
    probability of 7 would be drawn wrong without a word."""
    if array.size == 0:
        return
    wide = array.astype(np.float32)  # float16's own min/max would overflow on nothing, but compare in float32
    if not np.isfinite(wide).all():
        raise ValueError(f"field '{where}' holds values that are not finite numbers")
    low_seen, high_seen = float(wide.min()), float(wide.max())
    if low_seen < 0 or (high is not None and high_seen > high):
        bound = f"from 0 to {high:g}" if high is not None else "0 or more"
        raise ValueError(f"field '{where}' holds {low_seen if low_seen < 0 else high_seen:g}; its values must be {bound}")


def check_arrays(trace: Trace) -> None:
    """A built Trace: attention and cache pictures have the shapes its tokens and model config imply, and
    their values are what they claim to be (attention probabilities from 0 to 1, norms finite and not negative)."""
    cfg = trace.model_config
    T, n_steps = trace.n_prompt, len(trace.steps)
    if trace.attention is not None:
        att = trace.attention
        if not (len(att.layers) == len(att.prefill) == len(att.decode)):
            raise ValueError("field 'attention' must have one prefill matrix and one list of decode rows per layer")
        H = cfg.n_heads
        for i in range(len(att.layers)):
            if att.prefill[i].shape != (H, T, T):
                raise ValueError(f"field 'attention.prefill[{i}]' has shape {att.prefill[i].shape}, expected "
                                 f"{(H, T, T)} (heads, prompt tokens, prompt tokens)")
            _values(att.prefill[i], f"attention.prefill[{i}]", PROBABILITY_MAX)
            rows = att.decode[i]
            if len(rows) != n_steps:
                raise ValueError(f"field 'attention.decode[{i}]' has {len(rows)} rows for {n_steps} decode steps")
            for s, row in enumerate(rows):
                if row.shape != (H, T + s + 1):
                    raise ValueError(f"field 'attention.decode[{i}][{s}]' has shape {row.shape}, expected {(H, T + s + 1)}")
                _values(row, f"attention.decode[{i}][{s}]", PROBABILITY_MAX)
    for key in ("kv_key_norms", "kv_value_norms"):
        norms = getattr(trace, key)
        if norms is None:
            continue
        if cfg is None:
            raise ValueError(f"field '{key}' needs the model's 'config' to be read")
        if norms.ndim != 3 or norms.shape[:2] != (cfg.n_layers, cfg.n_kv_heads) or norms.shape[2] < 1:
            raise ValueError(f"field '{key}' has shape {norms.shape}, expected ({cfg.n_layers}, {cfg.n_kv_heads}, tokens)")
        _values(norms, key, None)
    if (trace.kv_key_norms is None) != (trace.kv_value_norms is None):
        raise ValueError("fields 'kv_key_norms' and 'kv_value_norms' come together")
