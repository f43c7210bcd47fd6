"""The decode-step-against-context sweep: its plan stops at the window or the memory, its steps run on a Run's path
over caches of exactly the asked lengths, repeated in rounds, and Cancel keeps what was measured."""
import pytest

from engine.errors import EngineError
from engine.labs import context_sweep as cs
from engine.labs.decode_paths import decode_path


def test_the_plan_climbs_to_the_window_or_what_memory_allows():
    plan, why = cs.context_plan(8192, 46080, 6, available=None)
    assert plan[0] == 64 and plan[-1] == 8192 - 6 - 1 and "window" in why
    small, why = cs.context_plan(8192, 46080, 6, available=100 * 46080)
    assert small[-1] == 50 and "memory" in why
    capped, why = cs.context_plan(1 << 20, 100, 6, available=None)
    assert capped[-1] == cs.MOST and "cap" in why
    with pytest.raises(EngineError, match="no room"):
        cs.context_plan(8192, 46080, 6, available=10)


def test_steps_are_timed_over_caches_of_each_length(tiny_llama, monkeypatch):
    lengths = []
    real = cs.decode_loop

    def spy(lm, token, cache, steps, **kwargs):
        lengths.append(cache.length)
        return real(lm, token, cache, steps, **kwargs)

    monkeypatch.setattr(cs, "decode_loop", spy)
    result = cs.sweep_contexts(tiny_llama, steps=3, repeats=2)
    window = tiny_llama.config.max_seq_len
    assert [p.context for p in result.points] == [64, window - 4]
    assert lengths == [64, window - 4] * 2  # rounds: every context once per round
    assert all(len(p.step_s) == 2 and p.step.median > 0 for p in result.points)
    assert result.points[-1].kv_bytes == (window - 4) * result.kv_bytes_per_token
    assert result.path == decode_path(tiny_llama, 1) and result.cpu_wait.runs == 2 and not result.cancelled


def test_cancel_keeps_the_contexts_measured(tiny_llama):
    result = cs.sweep_contexts(tiny_llama, contexts=[16, 32, 64], steps=2, repeats=2,
                               progress=lambda message, fraction: fraction < 0.3)
    assert result.cancelled and [p.context for p in result.points] == [16, 32]
