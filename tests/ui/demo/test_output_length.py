"""How a run's output ended: early at the model's end-of-text (said plainly), or past it with the exact length on."""
import copy
import dataclasses
from types import SimpleNamespace

import engine
from ui.demo import output_length

EOS = 2


def _trace(output_ids, stop="length", asked=None, ignore_eos=True, eos=(EOS,)):
    return SimpleNamespace(output_ids=list(output_ids), n_output=len(output_ids), stop_reason=stop,
                           settings={"max_new_tokens": asked or len(output_ids), "ignore_eos": ignore_eos},
                           config={"eos_token_ids": list(eos)})


def test_an_early_end_names_the_tokens_and_the_switch():
    one = output_length.early_end(_trace([EOS], "eos", asked=64, ignore_eos=False))
    assert "after 1 of the 64 tokens" in one and "no step at all" in one and "Exact output length" in one
    some = output_length.early_end(_trace([5, 6, EOS], "eos", asked=64, ignore_eos=False))
    assert "decode ran 2 steps, not 63" in some


def test_no_early_end_when_the_length_was_reached():
    assert output_length.early_end(_trace([5, 6, 7], "length")) is None
    assert output_length.early_end(_trace([5, EOS], "eos", asked=2, ignore_eos=False)) is None  # the last token asked


def test_past_the_end_with_the_exact_length_on():
    line = output_length.past_end(_trace([EOS, 5, 6, 7]))
    assert "ended at token 1" in line and "4 tokens asked" in line
    assert output_length.past_end(_trace([5, 6, EOS])) is None  # its end came last: nothing written past it
    assert output_length.past_end(_trace([5, 6, 7])) is None
    assert output_length.past_end(_trace([EOS, 5], ignore_eos=False)) is None


def test_a_server_run_without_a_config_says_nothing():
    trace = _trace([EOS, 5])
    trace.config = None
    assert output_length.end_of_text_at(trace) is None and output_length.past_end(trace) is None


def test_a_real_run_past_the_end(tiny_llama):
    """The engine's own trace carries what the lines read: the eos ids, the setting, the tokens."""
    first = engine.generate(tiny_llama, "The valley and the bridge", 1, ignore_eos=True).output_ids[0]
    lm = copy.copy(tiny_llama)  # the session's model stays as it was
    lm.config = dataclasses.replace(lm.config, eos_token_ids=(first,))  # its first token is now its end-of-text
    past = engine.generate(lm, "The valley and the bridge", 6, ignore_eos=True)
    stopped = engine.generate(lm, "The valley and the bridge", 6)
    assert past.n_output == 6 and "ended at token 1" in output_length.past_end(past)
    assert stopped.n_output == 1 and "after 1 of the 6 tokens" in output_length.early_end(stopped)
