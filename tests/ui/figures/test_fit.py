"""Figure layout for a projector: small segments labelled, and a long prompt's few decode rows still visible."""
from types import SimpleNamespace

import numpy as np

from engine.core.trace import AttentionCapture
from ui.figures import fig_attention, fig_timing


def split(prefill_s: float, decode_s: float) -> SimpleNamespace:
    return SimpleNamespace(prefill_s=prefill_s, decode_s=decode_s, prefill_share=prefill_s / (prefill_s + decode_s))


def test_a_small_segment_of_the_phase_split_is_still_labelled():
    for prefill_s, decode_s, small in ((0.096, 2.05, "Prefill (TTFT): 96 ms (4%)"), (8.6, 0.98, "Decode: 980 ms (10%)")):
        fig = fig_timing.phase_split_figure(split(prefill_s, decode_s))
        texts = [t for bar in fig.data for t in bar.text if t] + [a.text for a in fig.layout.annotations]
        assert small in texts  # the narrow one is named, with its time and share
        assert len(texts) == 2  # and the wide one keeps its own label


def long_prompt_trace(T: int = 1024, n: int = 7, H: int = 2):
    """A trace-like object with one captured layer: uniform causal attention over T prompt + n generated tokens."""
    prefill = np.tril(np.ones((H, T, T), dtype=np.float32))
    prefill /= prefill.sum(-1, keepdims=True)
    decode = [np.full((H, T + s + 1), 1.0 / (T + s + 1), dtype=np.float32) for s in range(n)]
    capture = AttentionCapture(layers=[0], prefill=[prefill], decode=[decode])
    return SimpleNamespace(attention=capture, n_prompt=T, prompt_tokens=[f"p{i}" for i in range(T)],
                           output_tokens=[f"o{i}" for i in range(n + 1)], output_ids=list(range(n + 1)))


def test_decode_rows_of_a_long_prompt_keep_visible_height():
    trace = long_prompt_trace()
    fig = fig_attention.phase_step_figure(trace, 0, None, step=7)
    decode_z = np.asarray(fig.data[1].z, dtype=float)
    rows_drawn = np.isfinite(decode_z).any(axis=1).sum()
    assert rows_drawn == 7  # one drawn row per decode step, not a sliver of one pooled row
    assert rows_drawn / decode_z.shape[0] > 0.05
    assert "taller" in fig.layout.xaxis.title.text  # the stretch is said, not hidden
    animation = fig_attention.phase_animation(trace, 0, None)
    assert np.isfinite(np.asarray(animation.frames[-1].data[0].z, dtype=float)).any(axis=1).sum() == 7


def test_generated_keys_behind_a_long_prompt_are_highlighted():
    trace = long_prompt_trace()
    fig = fig_attention.attention_row_figure(trace, 7, 0, None)  # decode step 6: 1,031 keys, 7 generated
    band = [s for s in fig.layout.shapes if s.type == "rect"]
    assert band and band[0].x1 - band[0].x0 >= 0.03 * 1031 - 1e-6  # a band at least 3 % wide
    dots = [t for t in fig.data if t.type == "scatter"]
    assert dots and list(dots[0].x) == list(range(1024, 1031))
    assert any("7 generated" in a.text for a in fig.layout.annotations)
    short = fig_attention.attention_row_figure(long_prompt_trace(T=20, n=7), 7, 0, None)
    assert not short.layout.shapes  # a short prompt's generated bars are wide enough on their own
