"""The server's text layer without HTTP: incremental detokenisation, stop strings, request parsing."""
import json

import pytest

from engine.serving.api_server.openai_schema import ApiError, parse_request, prompt_field
from engine.serving.api_server.text_stream import TextStream


def feed(tokenizer, ids, stop=()):
    stream = TextStream(tokenizer, stop)
    pieces = [stream.add(t) for t in ids]
    return stream, pieces, pieces + [stream.finish()]


@pytest.mark.parametrize("text", ["Two bends on the old post road", "Bonjour le monde! 你好，世界 🙂 done",
                                  "def add(a, b):\n    return a + b"])
def test_pieces_join_up_to_the_whole_decoded_text(tiny_llama, text):
    tok = tiny_llama.tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    _, pieces, everything = feed(tok, ids)
    assert "".join(everything) == tok.decode(ids) == text
    assert not any("\ufffd" in p for p in pieces)  # a split character is held until it is complete


def test_a_character_split_over_byte_tokens_waits_for_its_last_byte(tiny_llama):
    tok = tiny_llama.tokenizer
    ids = tok.encode("🙂", add_special_tokens=False)
    assert len(ids) > 1  # several byte tokens for one emoji
    _, pieces, _ = feed(tok, ids)
    assert pieces[:-1] == [""] * (len(ids) - 1) and pieces[-1] == "🙂"


def test_stop_string_is_cut_and_never_released(tiny_llama):
    tok = tiny_llama.tokenizer
    text = "the wide valley at Longmen Bay where the whole convoy rides"
    ids = tok.encode(text, add_special_tokens=False)
    stream, pieces, everything = feed(tok, ids, stop=["Longmen"])
    assert stream.stopped and "".join(everything) == "the wide valley at "
    assert not any("Long" in p for p in pieces)


def test_text_that_only_looks_like_a_stop_string_is_released_later(tiny_llama):
    tok = tiny_llama.tokenizer
    ids = tok.encode("the bridge, the bride", add_special_tokens=False)
    stream, _, everything = feed(tok, ids, stop=["bridesmaid"])
    assert not stream.stopped and "".join(everything) == "the bridge, the bride"


def test_end_of_sequence_token_adds_no_text(tiny_llama):
    tok = tiny_llama.tokenizer
    ids = tok.encode("Two bends", add_special_tokens=False) + list(tiny_llama.config.eos_token_ids)
    assert "".join(feed(tok, ids)[2]) == "Two bends"


def test_parse_defaults_follow_openai():
    ask = parse_request({"model": "m", "prompt": "hi"}, "completion")
    assert ask.max_tokens == 16 and ask.params.temperature == 1.0 and not ask.stream and ask.stop == []
    chat = parse_request({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                          "max_completion_tokens": 5, "top_k": -1, "stop": "END"}, "chat")
    assert chat.max_tokens == 5 and chat.params.top_k == 0 and chat.messages[0]["content"] == "hi" and chat.stop == ["END"]


def test_a_completion_takes_each_form_of_prompt_openai_does():
    forms = {"a": ["a"], "[1, 2]": [[1, 2]], '["a", "b"]': ["a", "b"], "[[1], [2, 3]]": [[1], [2, 3]],
             '["a", [4]]': ["a", [4]], '["a"]': ["a"]}
    for text, want in forms.items():
        assert parse_request({"prompt": json.loads(text) if text != "a" else text}, "completion").prompts == want
    assert parse_request({"prompt": "a"}, "completion").model is None  # left out: the served model


def test_tokenize_takes_one_prompt():
    assert prompt_field(["a"]) == "a" and prompt_field([3, 4]) == [3, 4]
    with pytest.raises(ApiError, match="takes one prompt") as err:
        prompt_field(["a", "b"])
    assert err.value.status == 400 and err.value.body()["error"]["param"] == "prompt"
