"""How much memory is free for what the engine is about to allocate (a batch's KV cache, a widened weight copy)."""
from __future__ import annotations

import os

import torch


def available_memory_bytes(device: torch.device | str) -> int | None:
    """Free memory: torch.cuda.mem_get_info on CUDA, /proc/meminfo MemAvailable on Linux, else None."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB -> bytes
    except OSError:
        pass
    if hasattr(os, "sysconf"):
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError):
            return None
    return None
