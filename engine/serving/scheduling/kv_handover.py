"""The cart between the bends: one request's KV cache carried from the prefill worker to the decode worker.

Disaggregated serving (DistServe, Splitwise, Mooncake, vLLM's KV connectors) runs the valley (prefill) and the
bridge (decode) on separate workers, so the prompt's keys and values must travel: here through a block of shared
memory (a file in RAM, /dev/shm), written once by the prefill worker and read once by the decode worker, who then
removes it. Only the block's name crosses the pipe. What travels is 2 x layers x K x T x D x dtype bytes, the same
number the trace calls kv_bytes_per_token x T; the two copies are timed on each side.
"""
from __future__ import annotations

import math
import mmap
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.core.kv_cache import KVCache

SHM_DIR = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
PREFIX = "two-bends-kv-"  # every block's name starts so: PREFIX + session + "-" + request id


@dataclass
class Handover:
    """What crosses the pipe for one request: where its block lies and what it holds (never the bytes themselves)."""
    path: str
    shape: tuple[int, ...]  # (2, L, K, T, D): keys and values, per layer
    dtype: str  # torch dtype name, e.g. "float32"
    nbytes: int
    write_seconds: float  # the prefill worker's copy into the block
    read_seconds: float = 0.0  # the decode worker's copy out of it (filled there)

    @property
    def tokens(self) -> int:
        return self.shape[3]


def block_path(session: str, request_id: int) -> Path:
    return SHM_DIR / f"{PREFIX}{session}-{request_id}"


def _mapped(fd: int, nbytes: int, dtype: torch.dtype, shape: tuple[int, ...]):
    mm = mmap.mmap(fd, nbytes)
    return mm, torch.frombuffer(mm, dtype=dtype).view(shape)  # (2, L, K, T, D) over the shared block


def pack(cache: KVCache, row: int, path: Path) -> Handover:
    """Copy row `row` of `cache` (its filled part) into a new shared block at `path`."""
    start = time.perf_counter()
    n = int(cache.lengths[row])
    shape = (2, len(cache.keys), cache.cfg.n_kv_heads, n, cache.cfg.head_dim)  # (2, L, K, T, D)
    nbytes = math.prod(shape) * cache.dtype.itemsize
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, nbytes)
        mm, block = _mapped(fd, nbytes, cache.dtype, shape)
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values)):
            block[0, layer].copy_(k[row, :, :n])  # (K, T, D)
            block[1, layer].copy_(v[row, :, :n])
        del block
        mm.close()
    except BaseException:
        discard_path(path)
        raise
    finally:
        os.close(fd)
    return Handover(str(path), shape, str(cache.dtype).removeprefix("torch."), nbytes, time.perf_counter() - start)


def unpack(handover: Handover, cache: KVCache, row: int) -> float:
    """Copy the block into row `row` of `cache` (positions 0..T-1), set its length, remove the block; seconds taken."""
    start = time.perf_counter()
    dtype = getattr(torch, handover.dtype)
    try:
        fd = os.open(handover.path, os.O_RDWR)
    except FileNotFoundError:
        raise RuntimeError(f"the KV block {handover.path} is gone (cancelled or cleaned up)") from None
    try:
        mm, block = _mapped(fd, handover.nbytes, dtype, handover.shape)
        n = handover.tokens
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values)):
            k[row, :, :n].copy_(block[0, layer])  # (K, T, D)
            v[row, :, :n].copy_(block[1, layer])
        del block
        mm.close()
        cache.lengths[row] = n
    finally:
        os.close(fd)
        discard_path(Path(handover.path))
    handover.read_seconds = time.perf_counter() - start
    return handover.read_seconds


def discard_path(path: Path | str) -> None:
    """Remove a block if it is still there (a cancelled request, a worker that died with it in flight)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def leftovers(session: str) -> list[Path]:
    """Blocks of this session still in shared memory (none once every request has ended)."""
    return sorted(SHM_DIR.glob(f"{PREFIX}{session}-*"))


def new_session() -> str:
    """A coordinator's name for its blocks: its pid (so orphans can be told apart) and a random part."""
    return f"{os.getpid()}x{os.urandom(4).hex()}"


def sweep_orphans() -> int:
    """Remove blocks whose coordinator process no longer runs (it was killed before it could sweep its own)."""
    removed = 0
    for path in SHM_DIR.glob(f"{PREFIX}*x*-*"):
        pid = path.name.removeprefix(PREFIX).split("x", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            discard_path(path)
            removed += 1
    return removed


def sweep(session: str) -> int:
    """Remove every block a session left behind (its workers died or stopped with carts in flight)."""
    paths = leftovers(session)
    for path in paths:
        discard_path(path)
    return len(paths)
