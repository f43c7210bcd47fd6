"""The one file where this machine's measurements of the fast paths are kept: measured-fast-paths.json.

Each fast path is measured once per machine (engine/techniques/fast_paths.py; the matmul kernels:
kernel_choice.py), and the outcome kept under a key that says what makes it valid: the CPU's model and
instruction-set flags, the torch version, the threads, the dtype, the model's shapes, and whatever the path adds
(its source, the context it was timed at). A key that differs in anything is measured again. The file sits beside
the model cache (TWO_BENDS_CACHE); unreadable means empty, never a crash, and it is written aside and renamed.

One rule for every measurement kept here: one whose threads waited for a CPU a noticeable share of its time
(engine/host/cpu_wait.py) is used but kept as disturbed, the next loads measure again (up to MAX_TRIES in all), and
the least disturbed one stands.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

import torch
from torch import nn

CACHE_FILE = "measured-fast-paths.json"
# the libraries' own instruction-set caps: with them an AVX-512 machine runs as an AVX2-only one would
# (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2), so a measurement made under a cap
# is its own, never reused without it
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
DISTURBED_SHARE = 0.05  # a measurement whose threads waited for a CPU more than this share of its time is disturbed
DISTURBED_MIN_S = 0.05  # ... and more than this in all (a scheduler tick or two is not a disturbance)
MAX_TRIES = 3  # measurements of one key, at most, while each was disturbed; then the least disturbed one stays


def wait_share(wait_s: float | None, spent_s: float) -> float:
    """The share of a measurement's `spent_s` its threads waited for a CPU (0 where that was not measurable)."""
    return (wait_s or 0.0) / spent_s if spent_s > 0 else 0.0


def disturbed(wait_s: float | None, spent_s: float) -> bool:
    """Other programs held the CPU for a noticeable share of a measurement: its outcome may be theirs."""
    return (wait_s or 0.0) > max(DISTURBED_MIN_S, DISTURBED_SHARE * spent_s)


def measure_again(found) -> bool:
    """Whether a kept measurement (a fast path's Verdict, the matmul Choice) is disturbed with tries left."""
    return found.disturbed and found.tries < MAX_TRIES


def again(verb: str, tries: int) -> str:
    """What becomes of a disturbed measurement: '<verb> again at the next load', or kept once the tries are spent."""
    return (f"{verb} again at the next load, try {tries} of {MAX_TRIES}" if tries < MAX_TRIES
            else f"the least disturbed of {tries} tries, kept")


def default_cache_dir() -> Path:
    """The model cache's folder (engine/loading/cache_folder.cache_root: techniques sit below loading)."""
    return Path(os.environ.get("TWO_BENDS_CACHE") or Path.home() / ".cache" / "two-bends")


def _cpuinfo() -> tuple[str | None, list[str] | None]:
    """(the first model name, the sorted instruction-set flags) from /proc/cpuinfo's first CPU; None where absent."""
    name = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name is None:
                name = value.strip()
            elif key.strip() in ("flags", "Features"):
                return name, sorted(value.split())
    except OSError:
        pass
    return name, None


def cpu_flags() -> list[str]:
    """The CPU's instruction-set flags (avx2, avx512_bf16, amx_tile, ...), sorted; [] where /proc/cpuinfo has none."""
    return _cpuinfo()[1] or []


def cpu_identity() -> tuple[str, str]:
    """(CPU model name, a digest of its instruction-set flags) from /proc/cpuinfo; platform's words elsewhere."""
    name, flags = _cpuinfo()
    text = " ".join(flags) if flags is not None else torch.backends.cpu.get_cpu_capability()
    return name or platform.processor() or platform.machine(), hashlib.sha256(text.encode()).hexdigest()[:16]


def shapes(model: nn.Module) -> list[list[int]]:
    """[out, in, count] of every nn.Linear in the model, sorted: the matrices the kernels will read."""
    count: dict[tuple[int, int], int] = {}
    for m in model.modules():
        if isinstance(m, nn.Linear):
            count[m.out_features, m.in_features] = count.get((m.out_features, m.in_features), 0) + 1
    return sorted([o, i, n] for (o, i), n in count.items())


def machine_key(model: nn.Module, dtype: torch.dtype) -> dict:
    """What every measurement on this machine is valid for: CPU, flags, torch, threads, dtype, the model's matrices."""
    cpu, flags = cpu_identity()
    key = {"cpu": cpu, "flags": flags, "torch": torch.__version__, "threads": torch.get_num_threads(),
           "dtype": str(dtype).removeprefix("torch."), "shapes": shapes(model)}
    caps = {name: os.environ[name] for name in ISA_CAPS if os.environ.get(name)}
    if caps:  # absent otherwise
        key["isa_caps"] = dict(caps, aten=torch.backends.cpu.get_cpu_capability())
    return key


def key_id(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def read_all(folder: Path) -> tuple[dict, str]:
    """{key id: {"key", "record", "when"}} and '' , or {} and why the file could not be read (then: measured again)."""
    path = folder / CACHE_FILE
    if not path.exists():
        return {}, ""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data, ""
    except (OSError, ValueError) as exc:
        return {}, f"the cache file {path.name} was unreadable ({type(exc).__name__}), so measured again"


def recall(folder: Path, key: dict) -> dict | None:
    """The record kept for exactly `key`, or None (none, another key under the same id, an unreadable file)."""
    entry = read_all(folder)[0].get(key_id(key))
    if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("record"), dict):
        return entry["record"]
    return None


def remember(folder: Path, key: dict, record: dict) -> None:
    """Keep `record` under `key`, written aside and renamed into place; a folder that cannot be written is skipped
    (the next process measures again)."""
    data, _ = read_all(folder)
    data[key_id(key)] = {"key": key, "record": record, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = folder / CACHE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
