"""A cancelled run (on_step returned False) skips the attention capture: nobody will look at it."""
import engine


def test_a_cancelled_run_skips_the_attention_capture(tiny_llama):
    told = []
    trace = engine.generate(tiny_llama, "the sea", 8, ignore_eos=True, capture_attention=True,
                            on_step=lambda t: False, on_capture=told.append)
    assert trace.stop_reason == "cancelled"
    assert trace.attention is None and trace.capture_seconds == 0.0 and not told


def test_a_finished_run_still_captures(tiny_llama):
    trace = engine.generate(tiny_llama, "the sea", 4, ignore_eos=True, capture_attention=True)
    assert trace.stop_reason == "length" and trace.attention is not None
