"""Do 2 MB pages speed up the decode step on this machine? The same weights on 2 MB and on 4 KB pages, in one process.

A batch-1 decode step reads every weight once, so on 4 KB pages it walks ~130 k page-table entries a step (SmolLM2-135M,
float32) and could be TLB-bound; Linux gives 2 MB "transparent huge pages" to memory marked MADV_HUGEPAGE. Comparing
two processes (one with torch's THP_MEM_ALLOC_ENABLE=1) mixes that effect with the minute-to-minute noise of a shared
host, so here one process holds two copies of the model's weights: one in an anonymous mapping advised
MADV_HUGEPAGE, one advised MADV_NOHUGEPAGE. The parameters are pointed at one copy, then the other, step by step
(the two taking turns), and the medians compared. The KV cache and the head's prepacked copy (fast kernels) are the
same memory in both arms. Prints how much of each copy Linux actually put on 2 MB pages (AnonHugePages).

    flock /tmp/tb/bench.lock .venv/bin/python scripts/page_size_bench.py [--steps 60] [--contexts 128,1024]
"""
from __future__ import annotations

import argparse
import mmap
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.core.kv_cache import KVCache  # noqa: E402
from engine.loading.loader import load_model  # noqa: E402
from engine.loading.model_store import DEFAULT_MODEL  # noqa: E402


def weights_on_pages(params: list[torch.Tensor], huge: bool) -> tuple[list[torch.Tensor], mmap.mmap]:
    """Copies of `params` in one anonymous mapping advised for 2 MB pages (huge) or against them."""
    sizes = [-(-p.numel() * p.element_size() // 64) * 64 for p in params]  # each copy 64-byte aligned
    area = mmap.mmap(-1, sum(sizes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # page-aligned, untouched
    area.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    raw = torch.frombuffer(area, dtype=torch.uint8)  # (bytes,) over the mapping
    copies, at = [], 0
    for p, size in zip(params, sizes):
        view = raw[at: at + p.numel() * p.element_size()].view(p.dtype).view(p.shape)
        view.copy_(p)  # first touch: the kernel picks the page size here
        copies.append(view)
        at += size
    return copies, area


def huge_bytes_of(address: int) -> int | None:
    """AnonHugePages of the mapping holding `address` (/proc/self/smaps), None where Linux does not say."""
    try:
        lines = Path("/proc/self/smaps").read_text().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0] if line else ""
        if "-" in head and ":" not in head:  # a mapping's first line: "start-end perms ..."
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1]) * 1024
    return None


@torch.inference_mode()
def compare(lm, contexts: list[int], steps: int) -> tuple[list[dict], dict[str, tuple[int, int | None]]]:
    """Per context, the median decode-step seconds of `steps` timed steps with the weights on 2 MB pages and on 4 KB
    pages, the arms taking turns; and per arm, the copy's bytes and how many of them Linux put on 2 MB pages."""
    model = lm.model
    params = list(dict.fromkeys(model.parameters()))  # tied matrices once
    originals = [p.data for p in params]
    arms = {name: weights_on_pages(originals, huge) for name, huge in (("2 MB", True), ("4 KB", False))}
    pages = {name: (sum(c.numel() * c.element_size() for c in copies), huge_bytes_of(copies[0].data_ptr()))
             for name, (copies, _) in arms.items()}
    cache = KVCache(model.cfg, 1, max(contexts) + 2, lm.dtype, lm.device)
    ids = torch.ones(1, 1, dtype=torch.long)
    timings = []
    try:
        for context in contexts:
            seconds = {name: [] for name in arms}
            for step in range(steps + 1):  # round 0 of each arm is a warm-up
                for name in (sorted(arms) if step % 2 else sorted(arms, reverse=True)):
                    for p, copy in zip(params, arms[name][0]):
                        p.data = copy
                    cache.lengths[:] = context
                    start = time.perf_counter()
                    model(ids, cache)
                    if step:
                        seconds[name].append(time.perf_counter() - start)
            timings.append({"context": context} | {name: statistics.median(s) for name, s in seconds.items()})
    finally:
        for p, original in zip(params, originals):
            p.data = original
    return timings, pages


def main(argv: list[str] | None = None) -> tuple[list[dict], dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--kernels", default="fast", choices=["fast", "plain"])
    parser.add_argument("--steps", type=int, default=60, help="timed steps per arm and context")
    parser.add_argument("--contexts", default="128,1024", help="cached tokens before the timed step")
    args = parser.parse_args(argv)
    lm = load_model(args.model, "cpu", "float32", kernels=args.kernels)
    contexts = [int(c) for c in args.contexts.split(",")]
    print(f"# {lm.name} | float32 | {torch.get_num_threads()} threads | kernels: {lm.kernels}")
    if lm.kernel_choice == "fast" and getattr(lm.model, "compiled_decode", None) is None:
        print("# note: fast kernels without the compiled step read their own prepacked copies of the layers' weights, "
              "which this script does not move: only the norms change pages. Use --kernels plain here.")
    timings, pages = compare(lm, contexts, args.steps)
    for name, (size, held) in pages.items():
        on_huge = "not reported" if held is None else f"{held / 2**20:.0f} MB on 2 MB pages"
        print(f"# weights on {name} pages: {size / 2**20:.0f} MB, {on_huge}")
    for row in timings:
        print(f"context {row['context']:>5}: decode step {1000 * row['2 MB']:.2f} ms on 2 MB pages, "
              f"{1000 * row['4 KB']:.2f} ms on 4 KB pages (medians of {args.steps}); "
              f"4 KB / 2 MB = {row['4 KB'] / row['2 MB']:.3f}")
    return timings, pages

if __name__ == "__main__":
    main()
