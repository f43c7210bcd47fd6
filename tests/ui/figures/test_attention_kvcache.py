"""Unit tests of the valley/bridge figure builders and numbers (tiny model, no Streamlit)."""
import numpy as np
import pytest

import engine
from engine.core.config import ModelConfig
from engine.perfmodel.flops import prefill_flops
from ui.figures import fig_attention, fig_kvcache
from ui.text import phase_numbers

N_NEW = 6


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "Hello world,\n  the <b>valley</b> & the bridge", N_NEW, capture_attention=True,
                           ignore_eos=True)


def smollm_config() -> ModelConfig:
    return ModelConfig(arch="llama", vocab_size=49152, n_layers=30, d_model=576, n_heads=9, n_kv_heads=3, head_dim=64,
                       d_ff=1536, max_seq_len=8192, norm_eps=1e-5)


def test_prefill_heatmap_is_causal_with_nan_above_diagonal(trace):
    T = trace.n_prompt
    matrix = fig_attention.prefill_matrix(trace, 0, 1)
    assert matrix.shape == (T, T)
    upper = np.triu_indices(T, k=1)
    assert np.isnan(matrix[upper]).all()
    assert not np.isnan(matrix[np.tril_indices(T)]).any()
    np.testing.assert_allclose(np.nansum(matrix, axis=1), 1.0, atol=1e-2)  # each visible row is a distribution
    fig = fig_attention.attention_heatmap(trace, 0, 1)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (T, T) and np.isnan(z[upper]).all()
    assert fig.data[0].colorbar.title.text  # a labelled colour bar
    log_z = np.asarray(fig_attention.attention_heatmap(trace, 0, 1, scale="log").data[0].z, dtype=float)
    assert np.isnan(log_z[upper]).all()
    np.testing.assert_allclose(log_z[np.tril_indices(T)], np.log10(np.clip(matrix[np.tril_indices(T)], 1e-4, 1)), rtol=1e-5)


def test_head_mean_equals_manual_mean(trace):
    layer = len(trace.attention.layers) - 1
    probs = np.asarray(trace.attention.prefill[layer], dtype=np.float32)  # (H, T, T)
    manual = probs.mean(axis=0)
    manual[np.triu_indices_from(manual, k=1)] = np.nan
    np.testing.assert_allclose(fig_attention.prefill_matrix(trace, layer, None), manual, rtol=1e-6, equal_nan=True)
    row = fig_attention.history_row(trace, 2, layer, None)
    np.testing.assert_allclose(row, np.asarray(trace.attention.decode[layer][1], dtype=np.float32).mean(axis=0), rtol=1e-6)


def test_animation_frames_one_per_decode_step_and_prefill_first(trace):
    T, n = trace.n_prompt, len(trace.attention.decode[0])
    assert n == len(trace.steps) == N_NEW - 1
    fig = fig_attention.phase_animation(trace, 0, None)
    assert len(fig.frames) == 1 + n
    prefill_z = np.asarray(fig.data[0].z, dtype=float)  # static prefill trace: every prompt row filled at once
    assert prefill_z.shape == (T + n, T + n)
    for row in range(T):
        assert np.isfinite(prefill_z[row, : row + 1]).all()
    assert np.isnan(prefill_z[T:]).all()
    first = np.asarray(fig.frames[0].data[0].z, dtype=float)
    assert np.isnan(first).all()  # frame 0: no decode rows yet
    for k in range(1, n + 1):  # frame k: exactly k decode rows, row T+s holding T+s+1 entries
        z = np.asarray(fig.frames[k].data[0].z, dtype=float)
        filled = [r for r in range(T + n) if np.isfinite(z[r]).any()]
        assert filled == list(range(T, T + k))
        assert np.isfinite(z[T + k - 1, : T + k]).all() and np.isnan(z[T + k - 1, T + k:]).all()


def test_long_prompts_are_pooled_keeping_the_mask(trace):
    matrix = np.tril(np.ones((10, 10), dtype=np.float32))
    matrix[np.triu_indices(10, k=1)] = np.nan
    pooled = fig_attention.pool(matrix, 3)
    assert pooled.shape == (4, 4)
    assert np.isnan(pooled[0, 1]) and pooled[1, 1] == 1.0 and pooled[3, 0] == 1.0


def test_attention_row_covers_the_history(trace):
    for position in (0, 3):
        fig = fig_attention.attention_row_figure(trace, position, 0, 0)
        assert len(fig.data[0].y) == trace.n_prompt + position


def test_kv_figure_has_one_column_per_token(trace):
    n_tokens = trace.n_prompt + trace.n_output - 1  # the last generated token is never fed back
    assert np.asarray(trace.kv_key_norms).shape[-1] == n_tokens
    for position in (0, 2, len(trace.steps)):
        fig = fig_kvcache.kv_cache_figure(trace, position)
        keys, values = (np.asarray(d.z, dtype=float) for d in fig.data[:2])
        assert keys.shape == values.shape == (np.asarray(trace.kv_key_norms).shape[0], n_tokens)
        cached = trace.n_prompt + position
        assert np.isfinite(keys[:, :cached]).all() and np.isnan(keys[:, cached:]).all()
    np.testing.assert_allclose(fig_kvcache.kv_matrix(trace, "values", None),
                               np.asarray(trace.kv_value_norms, dtype=np.float32).mean(axis=1))


def test_gqa_groups_smollm_shape():
    assert fig_kvcache.gqa_groups(9, 3) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    fig = fig_kvcache.gqa_figure(9, 3)
    assert len(fig.data) == 9 + 2  # one wire per query head, then the two rows of heads


def test_kv_byte_formula_for_smollm2():
    text = phase_numbers.kv_formula_text(smollm_config(), "float32")
    assert text.endswith("= 46,080 B per token")
    assert "30 layers" in text and "3 KV heads" in text and "64 dims" in text
    assert smollm_config().kv_bytes_per_token(4) == 46_080
    assert phase_numbers.kv_counter_text(46_080, 97).startswith("46,080 B/token × 97 tokens = 4,469,760 B")


def test_trace_carries_the_model_config_and_byte_counter_matches_the_cache(trace, tiny_llama):
    assert trace.model_config == tiny_llama.config  # pages read shapes here, never guess them from array sizes
    assert engine.Trace.from_json(trace.to_json()).model_config == tiny_llama.config
    for position in range(1, len(trace.steps) + 1):
        view = phase_numbers.decode_view(trace, position)
        assert view.kv_tokens == trace.n_prompt + position
        assert view.kv_bytes == view.kv_tokens * trace.kv_bytes_per_token  # measured cache = formula
        assert view.seconds == trace.steps[position - 1].seconds
    first = phase_numbers.decode_view(trace, 0)
    assert first.phase == "prefill" and first.seconds == trace.prefill_seconds and first.text_before == ""


def test_prefill_flops_formula():
    cfg = smollm_config()
    T = 64
    f = prefill_flops(cfg, T)
    assert f.attention == 2 * 2 * 30 * 9 * 64 * T * (T + 1) / 2  # the causal triangle, diagonal included
    assert f.matmul == 2 * cfg.matmul_params * T and f.lm_head == 2 * 49152 * 576
    batch = prefill_flops(cfg, T, batch=3)
    assert batch.total == pytest.approx(3 * f.total)  # B sequences of T tokens: B times the work, not (B·T)²


def test_label_formatting_makes_whitespace_visible():
    assert phase_numbers.visible_piece(" the") == "␣the"
    assert phase_numbers.visible_piece("\n\n") == "↵↵"
    assert phase_numbers.visible_piece("\t") == "⇥"
    assert phase_numbers.visible_piece("") == "∅"
    assert phase_numbers.visible_piece("\x17") == "⍰"
    assert phase_numbers.visible_piece("internationalisation", max_chars=6) == "inter…"
    positions, texts = phase_numbers.tick_labels([" a"] * 100, max_labels=20)
    assert len(positions) <= 20 and positions[1] - positions[0] == 5 and texts[0] == "␣a"


def test_model_text_is_escaped_for_markdown():
    escaped = phase_numbers.escape_markdown("<script>alert(1)</script> *bold* :red[x] $x$\nnext")
    assert "\\<script\\>" in escaped and "\\*bold\\*" in escaped and "\\:red\\[x\\]" in escaped and "\\$x\\$" in escaped
    assert "↵" in escaped
    view = phase_numbers.DecodeView(1, 2, "decode", "a*b", " [c]", "x", 5, 100, 0.01, 1000)
    assert phase_numbers.highlighted_text_markdown(view) == "a\\*b:blue-background[**␣\\[c\\]**]"
