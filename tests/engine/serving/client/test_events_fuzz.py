"""`engine measure` reads servers that are not ours: any streamed event (hypothesis) is taken in the OpenAI shape or
refused with a sentence, and any error answer becomes one printable line. The examples are derandomised for CI."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EngineError
from engine.serving.client.openai_client import Client, Streamed, take_event

odd_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8) | odd_text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
good_choice = st.fixed_dictionaries({"index": st.just(0), "text": st.text(max_size=6)},
                                    optional={"token_ids": st.lists(st.integers(0, 50_000), max_size=2),
                                              "finish_reason": st.sampled_from([None, "length", "stop"])})
good_chat_choice = st.fixed_dictionaries({"index": st.just(0), "delta": st.fixed_dictionaries(
    {}, optional={"role": st.just("assistant"), "content": st.text(max_size=6)})})
choice = good_choice | good_chat_choice | st.dictionaries(
    st.sampled_from(["text", "token_ids", "finish_reason", "index", "delta"]), json_values)
usage = st.fixed_dictionaries({}, optional={"prompt_tokens": st.integers(0, 10**6) | json_values,
                                            "completion_tokens": st.integers(0, 10**6) | json_values})
events = st.fixed_dictionaries({}, optional={"choices": st.lists(choice, max_size=2) | json_values,
                                             "usage": usage | json_values, "id": st.text(max_size=4)}) | json_values


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(stream=st.lists(events, min_size=1, max_size=5))
def test_any_stream_of_events_is_taken_whole_or_refused_with_a_sentence(stream):
    out = Streamed(sent_at=0.0)
    for i, event in enumerate(stream):
        try:
            take_event(event, float(i + 1), out)
        except ValueError as exc:
            assert str(exc) and "\n" not in str(exc)
            return
    # taken: what the report computes from it is well-defined
    assert all(isinstance(p, str) for p in out.pieces) and len(out.pieces) == len(out.chunk_times)
    assert all(isinstance(t, int) and t >= 0 for t in out.token_ids)
    assert out.finish_reason is None or isinstance(out.finish_reason, str)
    assert isinstance(out.output_tokens, int) and out.output_tokens >= 0
    if out.chunk_times:
        assert out.ttft > 0 and all(gap >= 0 for gap in out.itl)
    "".join(out.pieces).encode("utf-8", "backslashreplace")


@pytest.mark.parametrize("raw", [b"", b"\xff\xfe", b"[" * 5000, b'{"error": {"message": "first\\nsecond"}}',
                                 b'{"error": {"message": "\\ud800 bad"}}', b'{"detail": 7}', b'<html>\n<b>502</b>'])
def test_an_error_answer_becomes_one_printable_line(raw):
    error = Client("http://127.0.0.1:9").error_of("/v1/completions", 502, raw)
    assert isinstance(error, EngineError)
    message = str(error)
    assert message.startswith("http://127.0.0.1:9/v1/completions answered HTTP 502") and "\n" not in message
    message.encode("utf-8")  # printable: no lone surrogate left in it
    if raw.startswith(b'{"error"'):
        assert json.loads(raw)["error"]["message"].splitlines()[0].encode("utf-8", "backslashreplace").decode() in message


def test_a_chat_stream_is_read_from_its_deltas():
    out = Streamed(sent_at=0.0)
    for i, delta in enumerate([{"role": "assistant", "content": "Two"}, {"content": " bends"}, {}]):
        take_event({"choices": [{"index": 0, "delta": delta, "finish_reason": "length" if i == 2 else None}]},
                   float(i + 1), out)
    assert "".join(out.pieces) == "Two bends" and out.output_tokens == 3 and out.finish_reason == "length"
