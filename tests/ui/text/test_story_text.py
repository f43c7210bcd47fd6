"""ui/text/story_text.py: the story pages' sentences hold for the model and the run shown — grouped-query attention
named only where the config has it, a shared decode step called memory-bound only where its intensity allows."""
import pytest

from engine.perfmodel.model_shapes import model_shape
from ui.figures import fig_kvcache
from ui.text import lesson_physics as lp
from ui.text import story_text


@pytest.mark.parametrize("key", ["smollm2-135m", "gpt2", "llama-2-7b", "llama-3.1-8b"])
def test_the_kv_heads_caption_follows_the_config(key):
    cfg = model_shape(key).config
    group = cfg.n_heads // cfg.n_kv_heads
    words = story_text.gqa_caption(cfg.n_heads, cfg.n_kv_heads)
    title = fig_kvcache.gqa_figure(cfg.n_heads, cfg.n_kv_heads).layout.title.text
    if group > 1:  # SmolLM2 9 / 3, Llama-3.1 8B 32 / 8
        assert "Grouped-query attention" in words and f"{group}× smaller" in words and "share" in title
    else:  # GPT-2 and Llama-2 7B: one KV head per query head
        assert "no grouped-query attention" in words and "smaller" not in words
        assert "no grouped-query attention" in title


def test_one_rider_is_memory_bound_and_many_only_below_the_ridge():
    """A GEMV is 0.5 FLOP/byte in float32: one rider is below any CPU's ridge. Eight float32 riders make 4 FLOP/byte,
    above the 2.7–3.5 measured on this project's VM, so the caption states the condition, not the verdict."""
    one = story_text.decode_why("read X", 4, "float32", 1)
    assert one.startswith("Why memory-bound") and "0.5 FLOP per byte" in one
    eight = story_text.decode_why("read X", 4, "float32", 8)
    assert 8 * lp.gemv_intensity(4) > 3.5
    assert not eight.startswith("Why memory-bound") and "only while below the device's ridge" in eight
    assert "4 FLOP per byte" in eight
