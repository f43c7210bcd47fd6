"""The early-started engine worker (engine/serving/scheduling/early_start.py): the first ProcessService adopts it when
it runs the wanted settings and replaces it otherwise; start-up marks are JSON lines, and nothing without the variable."""

import pytest

from engine.serving.scheduling import early_start
from engine.serving.scheduling.early_start import options_from_env
from engine.serving.scheduling.work import ModelSpec, Request, result_of
from engine.serving.scheduling.worker import ProcessService, ServiceOptions

WAIT_S = 120


@pytest.fixture
def dashboard_env(monkeypatch):
    """The environment scripts/dashboard.sh would give, with the tiny model; no early worker left over."""
    for name in ("TWO_BENDS_MODE", "TWO_BENDS_MAX_QUEUE", "TWO_BENDS_MAX_NEW_TOKENS", "TWO_BENDS_MAX_BATCH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TWO_BENDS_MODEL", "tiny-llama")
    monkeypatch.setenv("TWO_BENDS_THREADS", "1")
    left = early_start.take_early()
    assert left is None, "a test left an early worker behind"
    yield
    left = early_start.take_early()
    if left is not None:
        left.proc.kill()
        left.proc.wait()


def test_the_first_process_service_adopts_the_early_worker(dashboard_env):
    early_start.start_early()
    early_pid = early_start._early.proc.pid
    service = ProcessService(options_from_env(), start_timeout=WAIT_S)
    try:
        assert service.pid == early_pid  # no second worker: the one spawned first loaded the model
        trace = result_of(service.submit(Request(model=ModelSpec("tiny-llama", "auto", "float32"), prompt_ids=[1, 2, 3],
                                                 max_new_tokens=3)), WAIT_S)
        assert trace.n_output == 3
    finally:
        service.close()
    assert early_start.take_early() is None  # handed over once


def test_an_early_worker_with_other_settings_is_replaced(dashboard_env):
    early_start.start_early()
    early = early_start._early
    wanted = ServiceOptions(threads=1, preload=ModelSpec("tiny-gpt2", "cpu", "float32"))
    service = ProcessService(wanted, start_timeout=WAIT_S)
    try:
        assert service.pid != early.proc.pid
        assert early.proc.poll() is not None  # ended and reaped, not left loading beside the new one
    finally:
        service.close()


def test_options_from_env_reads_the_dashboards_variables(monkeypatch):
    monkeypatch.setenv("TWO_BENDS_MODE", "batch")
    monkeypatch.setenv("TWO_BENDS_MAX_BATCH", "4")
    monkeypatch.setenv("TWO_BENDS_THREADS", "not a number")
    monkeypatch.setenv("TWO_BENDS_MODEL", "tiny-gpt2")
    monkeypatch.setenv("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", "64")
    got = options_from_env()
    assert (got.mode, got.max_batch, got.threads, got.preload) == ("batch", 4, 0, ModelSpec("tiny-gpt2", "auto", "float32"))
    assert got.max_num_batched_tokens == 64 and got.prepack_in_background
