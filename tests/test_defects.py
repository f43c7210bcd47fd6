"""One test per defect found when the first landing was tried (each failed before its fix)."""
import dataclasses
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import engine
from engine.core import generate as gen
from engine.core.layers import attention_explicit
from engine.labs import remedies
from engine.loading import model_store
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import Failed, Job, ModelSpec, Progress, drain


def test_a_finished_sequence_stops_growing_while_the_batch_goes_on(tiny_llama):
    tok = tiny_llama.tokenizer
    a, b = tok.encode("the wide valley at Longmen")[:6], tok.encode("the single-plank bridge")[:6]
    free = engine.generate_batch(tiny_llama, [a, b], 10, ignore_eos=True).batch_output_ids
    stop = next(t for t in free[0][1:] if t not in free[1] and t not in free[0][:1])  # A makes it, B never does
    lm = dataclasses.replace(tiny_llama, config=dataclasses.replace(tiny_llama.config, eos_token_ids=(stop,)))
    outs = engine.generate_batch(lm, [a, b], 10).batch_output_ids
    ends = free[0].index(stop) + 1
    assert outs[0] == free[0][:ends]  # A's text ends at its end token...
    assert outs[1] == free[1]  # ...while B got all of its tokens


def test_overhead_skeleton_has_deterministic_finite_weights(tiny_llama):
    one, two = remedies.skeleton_of(tiny_llama), remedies.skeleton_of(tiny_llama)
    for p, q in zip(one.model.parameters(), two.model.parameters()):
        assert torch.isfinite(p).all() and torch.equal(p, q)


def test_forward_refuses_positions_beyond_the_context(tiny_llama):
    cfg = tiny_llama.config  # 256 positions
    cache = engine.KVCache(cfg, 1, 300, tiny_llama.dtype)
    engine.prefill(tiny_llama, torch.ones(1, 250, dtype=torch.long), cache)
    with pytest.raises(engine.EngineError, match="exceed the model's context of 256 tokens"):
        engine.prefill(tiny_llama, torch.ones(1, 10, dtype=torch.long), cache)


def test_copy_prefix_checks_the_length(tiny_llama):
    small, big = engine.KVCache(tiny_llama.config, 1, 8, tiny_llama.dtype), engine.KVCache(tiny_llama.config, 1, 8, tiny_llama.dtype)
    small.advance(3)
    with pytest.raises(ValueError, match="cannot copy 5 positions from a cache of 3"):
        big.copy_prefix_from(small, 5)


def test_warm_up_state_is_not_on_the_shared_model_and_runs_once(tiny_gpt2):
    assert not hasattr(tiny_gpt2, "warm")  # the loaded model stays read-only for every session
    lm = engine.load_model("tiny-gpt2")  # a fresh model: never warmed
    seconds = []
    threads = [threading.Thread(target=lambda: seconds.append(gen.warm_up(lm, 3))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(s > 0 for s in seconds) == 1  # the others waited for that one warm-up, then skipped it


def test_cancel_reaches_a_running_lab_measurement():
    scheduler = Scheduler("queue").start()
    try:
        job = scheduler.submit(Job(model=ModelSpec("tiny-llama", "cpu"), name="remedies.kv_cache",
                                   args=("the valley and the bridge", 60)))
        start = time.perf_counter()
        for event in drain(job, timeout=60):
            if isinstance(event, Progress):
                scheduler.cancel(job)  # what the lab's Cancel button does
                break
        final = list(drain(job, timeout=60))[-1]
        assert isinstance(final, Failed) and final.cancelled
        assert time.perf_counter() - start < 30
    finally:
        scheduler.stop()


def test_explicit_attention_does_not_overflow_in_float16():
    torch.manual_seed(0)
    q = (torch.randn(1, 2, 4, 64) * 40).half()  # scores ~ 40*40*64 = 100k: beyond float16's 65,504
    k = (torch.randn(1, 2, 4, 64) * 40).half()
    v = torch.randn(1, 2, 4, 64).half()
    out, probs = attention_explicit(q, k, v)
    want, want_probs = attention_explicit(q.float(), k.float(), v.float())
    assert torch.isfinite(out).all() and torch.isfinite(probs).all()
    torch.testing.assert_close(probs.float(), want_probs, atol=2e-3, rtol=0)


def test_stale_conversion_folders_are_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    dead = tmp_path / ".converting-999999999-abcd"  # no such process
    old_style = tmp_path / ".converting-xyz123"  # from the first landing, which wrote no pid
    mine = tmp_path / f".converting-{os.getpid()}-efgh"  # a conversion still running in this process
    for folder in (dead, old_style, mine):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 10)
    model_store.clean_stale_conversions()
    assert not dead.exists() and not old_style.exists() and mine.exists()


def test_finished_cache_is_readable_by_other_users(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / "config.json").write_text("{}")
    (folder / "config.json").chmod(0o600)
    model_store._make_readable(folder)
    assert folder.stat().st_mode & 0o777 == 0o755
    assert (folder / "config.json").stat().st_mode & 0o777 == 0o644


def test_unreadable_cache_gives_a_clear_message(monkeypatch, tmp_path):
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(engine.EngineError, match="not readable by this user .* set TWO_BENDS_CACHE"):
        model_store._load_folder(tmp_path, "SmolLM2")


def test_capture_is_bounded_and_frees_as_it_goes(tiny_llama):
    from engine.core.capture import capture_attention, capture_bytes, layers_within_budget

    cfg = tiny_llama.config
    assert layers_within_budget(cfg, 64, 32) == list(range(cfg.n_layers))  # small runs: every layer
    assert layers_within_budget(cfg, 200, 50, budget=1) == [cfg.n_layers // 2]  # big runs: one layer
    got = capture_attention(tiny_llama, list(range(1, 21)), list(range(30, 40)), [1])
    assert got.layers == [1] and got.nbytes == capture_bytes(cfg.n_heads, 20, 10)
    assert np.isfinite(np.asarray(got.prefill[0], dtype=np.float32)).all()
