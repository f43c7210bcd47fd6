"""The model pool's background prepacking (engine/serving/scheduling/model_pool.py, the dashboard's fast start): a run
started before the fast kernels are ready runs on plain nn.Linear and its Trace says so; once they are ready the pool
hands out the fast model; describe says what happened at start."""
import threading
from dataclasses import replace

import pytest

import engine
from engine.core.backends import EAGER
from engine.serving.scheduling import model_pool
from engine.serving.scheduling.early_start import options_from_env
from engine.serving.scheduling.model_pool import ModelPool, describe
from engine.serving.scheduling.work import PENDING_DECODE_STEP, PENDING_KERNELS, ModelSpec
from engine.serving.scheduling.worker import ServiceOptions
from engine.techniques import fast_paths

FAST = ModelSpec("tiny-llama", "cpu", "float32", "fast")




@pytest.fixture
def held_packing(monkeypatch):
    """Prepacking that waits until the test releases it (so 'still prepacking' is certain, not a race)."""
    release = threading.Event()
    real = model_pool.with_kernels

    def slow(lm, kernels, **kw):
        assert release.wait(60)
        return real(lm, kernels, **kw)

    monkeypatch.setattr(model_pool, "with_kernels", slow)
    yield release
    release.set()


def test_a_run_before_the_fast_kernels_are_ready_uses_plain_and_says_so(held_packing):
    pool = ModelPool(background_kernels=True)
    lm = pool.get(FAST)
    assert replace(lm.backends, pending="") == EAGER  # the plain model...
    assert "plain nn.Linear" in lm.kernels and "still being prepacked" in lm.kernels  # ...and its label says so
    trace = engine.generate(lm, [1, 2, 3, 4], 3, ignore_eos=True)
    assert trace.env["kernels"] == lm.kernels  # the run's record names the kernels it actually ran on
    assert trace.env["backends"]["pending"] == PENDING_KERNELS  # ...and, as data, the work that shared its cores
    assert pool.get(FAST) is lm  # asked again while packing: the same stand-in, no second load
    assert "prepacked in the background at start" in describe(lm, FAST).kernels

    held_packing.set()
    pool.wait_for_kernels(60)
    fast = pool.get(FAST)
    assert fast.kernel_choice == "fast" and fast.kernels == engine.load_model("tiny-llama", "cpu").kernels
    assert "pending" not in engine.generate(fast, [1, 2, 3, 4], 2, ignore_eos=True).env["backends"]
    assert fast.model.blocks[0].attn.qkv.weight is lm.model.blocks[0].attn.qkv.weight  # the same weights, loaded once
    assert pool.get(ModelSpec("tiny-llama", "cpu", "float32", "plain")).kernel_choice == "plain"


@pytest.mark.skipif(fast_paths.forced_plain() != "", reason="TWO_BENDS_BACKENDS=plain: no fast stage to wait for")
def test_while_the_decode_step_compiles_runs_take_the_prepacked_model_and_say_so(monkeypatch):
    """Two stages in the background: prepacked kernels first, then (where one may serve) the decode step;
    between them the pool hands out the prepacked model, labelled, and a run on it keeps its model to the end."""
    release, real = threading.Event(), model_pool.with_decode_step

    def held(fast):
        assert release.wait(60)
        return real(fast)

    monkeypatch.setattr(model_pool, "with_decode_step", held)
    pool = ModelPool(background_kernels=True)
    pool.get(FAST)
    for _ in range(600):  # the prepacking stage ends by itself (tiny model: well under a second)
        early = pool.get(FAST)
        if early.kernel_choice == "fast":
            break
        threading.Event().wait(0.1)
    assert replace(early.backends, pending="") != EAGER  # the fast kernels, not the plain stand-in
    assert early.backends.decode_step is None and "still being compiled" in early.kernels
    trace = engine.generate(early, [1, 2, 3, 4], 3, ignore_eos=True)
    assert trace.env["kernels"] == early.kernels and trace.env["backends"]["pending"] == PENDING_DECODE_STEP
    release.set()
    pool.wait_for_kernels(120)
    done = pool.get(FAST)
    assert done is not early and "still" not in done.kernels and "decode step" in done.kernel_why
    assert early.backends.decode_step is None  # the model a run may still hold never changes under it
    assert done.model is early.model  # one module tree throughout: only the backends differ


def test_without_background_kernels_the_pool_loads_fast_kernels_before_it_answers():
    calls = []

    def loader(name, **kw):
        calls.append(kw["kernels"])
        return engine.load_model(name, **kw)

    lm = ModelPool(loader).get(FAST)
    assert calls == ["fast"] and lm.kernel_choice == "fast" and "still" not in lm.kernels


def test_only_the_dashboards_early_worker_prepacks_in_the_background():
    assert options_from_env().prepack_in_background and not ServiceOptions().prepack_in_background
    assert ServiceOptions(prepack_in_background=True) == ServiceOptions()  # the UI's options still adopt that worker
