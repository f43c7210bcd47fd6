"""Give memory the process has freed back to the operating system.

glibc keeps freed heap pages for reuse, and after a large tensor is freed it raises its mmap threshold
(up to 32 MB), so later activations of a long prompt come from the heap and stay resident after they
are freed (hundreds of MiB after a few long runs). `malloc_trim(0)`
returns free pages of every arena. It is called only when nothing is running (the scheduler idle, a
closed session's data dropped), never on a timed path. Elsewhere than glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_free_memory(collect: bool = False) -> bool:
    """Return free heap pages to the OS (~0.1 ms); True where glibc's malloc_trim ran.

    collect=True first runs Python's cycle collector (~0.1 s with torch loaded): for data that may sit in
    reference cycles (a closed session's), not for the scheduler, whose tensors are freed by refcount.
    """
    if collect:
        gc.collect()
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
