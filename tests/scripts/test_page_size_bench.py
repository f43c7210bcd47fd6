"""scripts/page_size_bench.py compares the same weights on 2 MB and 4 KB pages: each arm must hold exact copies, the
model must get its own weights back, and the 2 MB arm must really be on 2 MB pages where Linux gives them."""
import sys
from pathlib import Path

import pytest
import torch

from tests import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import page_size_bench as bench  # noqa: E402


def _thp_mode() -> str:
    try:
        return next(w.strip("[]") for w in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().split()
                    if w.startswith("["))
    except (OSError, StopIteration):
        return ""


def test_each_arm_holds_exact_copies():
    params = [torch.randn(40, 32), torch.randn(7), torch.randn(3, 5).bfloat16()]
    for huge in (True, False):
        copies, area = bench.weights_on_pages(params, huge)
        assert [c.dtype for c in copies] == [p.dtype for p in params]
        assert all(torch.equal(c, p) for c, p in zip(copies, params))
        assert all(c.data_ptr() % 64 == 0 for c in copies)


@pytest.mark.skipif(_thp_mode() not in ("madvise", "always") or not Path("/proc/self/smaps").exists(),
                    reason="needs Linux with transparent huge pages (madvise or always) and /proc/self/smaps")
def test_the_huge_arm_is_on_2mb_pages_and_the_other_is_not():
    params = [torch.ones(4 * 2**20)]  # 16 MB
    held = {}
    for huge in (True, False):
        copies, area = bench.weights_on_pages(params, huge)
        held[huge] = bench.huge_bytes_of(copies[0].data_ptr())
    assert held[True] >= 8 * 2**20 and held[False] == 0


def test_compare_times_both_arms_and_gives_the_weights_back(tiny_llama):
    before = [p.data_ptr() for p in tiny_llama.model.parameters()]
    timings, pages = bench.compare(tiny_llama, [8, 16], steps=2)
    assert [r["context"] for r in timings] == [8, 16]
    assert all(r["2 MB"] > 0 and r["4 KB"] > 0 for r in timings)
    assert set(pages) == {"2 MB", "4 KB"}
    assert [p.data_ptr() for p in tiny_llama.model.parameters()] == before
