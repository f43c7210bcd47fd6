"""The cart: a cache row packed into shared memory arrives bit for bit in another cache's row, and the block is gone."""
import os

import pytest
import torch

from engine.core.kv_cache import KVCache
from engine.serving.scheduling.kv_handover import block_path, discard_path, leftovers, pack, unpack


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_row_crosses_bit_for_bit_and_leaves_nothing_behind(tiny_llama, dtype):
    cfg, session = tiny_llama.config, "test" + os.urandom(3).hex()
    source = KVCache(cfg, 2, 40, dtype)
    for t in source.keys + source.values:
        t.copy_(torch.randn_like(t, dtype=torch.float32).to(dtype))
    source.lengths[:] = [30, 17]
    handover = pack(source, 1, block_path(session, 5))
    assert handover.nbytes == cfg.kv_bytes_per_token(dtype.itemsize) * 17 and handover.tokens == 17
    target = KVCache(cfg, 3, 64, dtype)
    unpack(handover, target, 2)
    assert int(target.lengths[2]) == 17 and leftovers(session) == []
    for mine, theirs in zip(target.keys + target.values, source.keys + source.values):
        assert torch.equal(mine[2, :, :17], theirs[1, :, :17])
        assert not mine[2, :, 17:].any()  # nothing beyond the prompt was carried
    with pytest.raises(RuntimeError, match="is gone"):
        unpack(handover, target, 0)
    discard_path(handover.path)  # a second discard is harmless


def test_blocks_of_a_coordinator_that_died_are_swept_and_live_ones_kept(tmp_path, monkeypatch):
    import engine.serving.scheduling.kv_handover as kv

    monkeypatch.setattr(kv, "SHM_DIR", tmp_path)
    mine = kv.block_path(kv.new_session(), 1)
    orphan = kv.block_path("999999999x0badcafe", 3)  # no such process
    for path in (mine, orphan):
        path.write_bytes(b"kv")
    assert kv.sweep_orphans() == 1
    assert mine.exists() and not orphan.exists()
