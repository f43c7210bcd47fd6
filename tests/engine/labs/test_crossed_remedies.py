"""The crossed experiment: each remedy on both requests, once per round, timed as a Run (exact lengths, greedy);
prefix caching computes only the prompt's uncached tail; a remedy that cannot run here says why."""
import pytest

from engine.errors import EngineError
from engine.labs import crossed_remedies as cr
from engine.labs import decode_paths
from engine.labs.timed_request import timed_request


def test_a_timed_request_makes_every_step_and_reuses_what_it_is_told(tiny_llama):
    ids = list(range(5, 37))
    full = timed_request(tiny_llama, ids, 6)
    reused = timed_request(tiny_llama, ids, 6, reused=28)
    assert len(full.step_s) == len(reused.step_s) == 5
    assert (full.reused_tokens, reused.reused_tokens) == (0, 28)
    assert full.ttft_s > 0 and full.total_s == pytest.approx(full.ttft_s + sum(full.step_s))
    with pytest.raises(EngineError):
        timed_request(tiny_llama, ids, 6, reused=32)


def test_every_configuration_runs_both_requests_each_round(plain_tiny, monkeypatch):
    monkeypatch.setattr(cr, "REQUESTS", {"valley-heavy": (32, 2), "bridge-heavy": (4, 6)})
    result = cr.measure_crossed(plain_tiny, rounds=2)
    assert result.rounds == 2 and not result.cancelled
    assert "fused" in result.skipped and "fused" not in result.remedies  # the eager tiny model has no fused step
    for request, (prompt, output) in result.requests.items():
        for config in ("baseline", "prefix", "int8"):
            runs = result.runs(request, config)
            assert len(runs) == 2 and all(len(t.step_s) == output - 1 for t in runs)
        assert {t.reused_tokens for t in result.runs(request, "prefix")} == {min(int(prompt * 7 / 8), prompt - 1)}
        assert {t.reused_tokens for t in result.runs(request, "baseline")} == {0}
    with pytest.raises(EngineError, match="unknown remedies"):
        cr.measure_crossed(plain_tiny, remedies=("faster horses",))


def test_the_fused_remedy_runs_the_step_a_run_takes_and_the_baseline_the_loop(fused_tiny, monkeypatch):
    monkeypatch.setattr(cr, "REQUESTS", {"valley-heavy": (16, 2), "bridge-heavy": (4, 4)})
    result = cr.measure_crossed(fused_tiny, rounds=1, remedies=("fused",))
    assert "fused" in result.remedies and "fused" not in result.skipped
    assert result.baseline_path == decode_paths.FLAT_LOOP and decode_paths.FUSED_C in result.notes["fused"]
    assert fused_tiny.backends.decode_step.calls == 2 + 1 + 3  # warm-up, then both requests' steps: the fused runs only


def test_cancel_keeps_the_rounds_measured(tiny_llama, monkeypatch):
    monkeypatch.setattr(cr, "REQUESTS", {"valley-heavy": (16, 2), "bridge-heavy": (4, 3)})
    result = cr.measure_crossed(tiny_llama, rounds=3, remedies=("prefix",),
                                progress=lambda message, fraction: fraction < 0.5)
    assert result.cancelled and result.rounds == 1


def test_requests_are_fitted_to_the_window():
    assert cr.fitted({"v": (256, 4), "b": (16, 48)}, 8192) == {"v": (256, 4), "b": (16, 48)}
    assert cr.fitted({"v": (256, 4), "b": (16, 48)}, 256) == {"v": (251, 4), "b": (16, 48)}
