"""A converted model's tokenizer without transformers (engine/loading/tokenizer_file.py): the same ids, text, special
tokens and chat prompts as transformers' fast tokenizer reading the same files."""
import copy
import pickle

import pytest

from engine.errors import EngineError
from engine.loading import tiny
from engine.loading.tokenizer_file import PlainTokenizer
from tests import ROOT

TEXTS = ["Hello world", "  leading spaces", "def add(a, b):\n    return a + b\n", "你好，世界 🙂", "Bonjour l'été !",
         "<|endoftext|> a special token inside", "x" * 200, "\n\n\t", "don't , . ? !", ""]
CHATS = [[{"role": "user", "content": "Why is decode slow?"}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
          {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "More 🙂"}]]


def _saved_by_transformers(tmp_path, template: str):
    """The tiny tokenizer as transformers writes a model cache (save_pretrained), and transformers' reading of it."""
    from transformers import PreTrainedTokenizerFast

    backend = copy.deepcopy(tiny.tiny_tokenizer().backend)
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = template
    fast.save_pretrained(tmp_path)
    return PreTrainedTokenizerFast.from_pretrained(tmp_path)


def _assert_same(ref, ours) -> None:
    for text in TEXTS:
        for special in (True, False):
            assert ours.encode(text, add_special_tokens=special) == ref.encode(text, add_special_tokens=special), text
        ids = ref.encode(text, add_special_tokens=False)
        for skip in (True, False):
            for k in range(len(ids) + 1):  # every prefix: a cut multi-byte character decodes the same too
                assert ours.decode(ids[:k], skip_special_tokens=skip) == ref.decode(ids[:k], skip_special_tokens=skip)
    for name in ("eos_token_id", "bos_token_id", "pad_token_id", "eos_token", "bos_token"):
        assert getattr(ours, name) == getattr(ref, name), name
    for chat in CHATS:
        for opening in (True, False):
            want = ref.apply_chat_template(chat, add_generation_prompt=opening, tokenize=True, return_dict=False)
            want = want["input_ids"] if hasattr(want, "keys") else want
            assert ours.apply_chat_template(chat, add_generation_prompt=opening) == list(want)
            assert ours.apply_chat_template(chat, add_generation_prompt=opening, tokenize=False) == \
                ref.apply_chat_template(chat, add_generation_prompt=opening, tokenize=False)


def test_reads_what_save_pretrained_wrote_as_transformers_does(tmp_path):
    template = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}{{ bos_token }}system: be kind\n"
                "{% endif %}{{ m['role'] }}: {{ m['content'] | trim }}{{ eos_token }}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant:{% endif %}")
    ref = _saved_by_transformers(tmp_path, template)
    ours = PlainTokenizer.from_folder(tmp_path)
    _assert_same(ref, ours)
    _assert_same(ref, pickle.loads(pickle.dumps(ours)))  # the worker sends it to the dashboard in the description


def test_a_tokenizer_read_from_a_folder_pickles_as_that_folder_and_is_read_once_per_process(tmp_path):
    from engine.loading import tokenizer_file

    ref = _saved_by_transformers(tmp_path, "{{ messages[0]['content'] }}")
    ours = PlainTokenizer.from_folder(tmp_path)
    data = pickle.dumps(ours)
    assert len(data) < 1000 and str(tmp_path).encode() in data  # the folder, not the vocabulary
    early = tokenizer_file.read_cached(str(tmp_path))  # the dashboard's launcher reads it before the description comes
    assert pickle.loads(data) is early and pickle.loads(data) is early
    _assert_same(ref, pickle.loads(data))
    (tmp_path / "tokenizer.json").write_text((tmp_path / "tokenizer.json").read_text() + "\n")  # changed since
    assert pickle.loads(data) is not early  # read again, not the stale copy
    built = PlainTokenizer(ours.backend, ours.special_tokens, ours.chat_template)  # from no folder: pickled whole
    assert len(pickle.dumps(built)) > 1000
    _assert_same(ref, pickle.loads(pickle.dumps(built)))
    for f in tmp_path.iterdir():
        f.unlink()
    with pytest.raises(EngineError, match="cannot be read any more"):
        pickle.loads(data)


def test_the_bundled_model_tokenizer_matches_transformers(smollm):
    from transformers import PreTrainedTokenizerFast

    from engine.loading.model_store import bundled_folder

    assert isinstance(smollm.tokenizer, PlainTokenizer)
    _assert_same(PreTrainedTokenizerFast.from_pretrained(bundled_folder()), smollm.tokenizer)


def test_template_errors_and_a_missing_template_are_engine_errors(tmp_path):
    ref = _saved_by_transformers(tmp_path, "{{ raise_exception('only user turns here') }}")
    del ref
    ours = PlainTokenizer.from_folder(tmp_path)
    with pytest.raises(EngineError, match="only user turns here"):
        ours.apply_chat_template(CHATS[0])
    bare = PlainTokenizer(ours.backend, {}, None)
    with pytest.raises(EngineError, match="no chat template"):
        bare.apply_chat_template(CHATS[0])
    assert bare.eos_token_id is None


def test_a_sandboxed_template_cannot_reach_python(tmp_path):
    _saved_by_transformers(tmp_path, "{{ messages.__class__.__mro__ }}")
    with pytest.raises(EngineError):
        PlainTokenizer.from_folder(tmp_path).apply_chat_template(CHATS[0])


def test_loading_the_converted_model_imports_no_transformers(smollm):  # smollm: the cache is converted
    """transformers' import is ~0.6 s of every worker start and of the dashboard reading the model description."""
    import subprocess
    import sys

    code = ("import sys; from engine.loading.model_store import load_bundled; ckpt = load_bundled(); "
            "ckpt.tokenizer.apply_chat_template([{'role': 'user', 'content': 'hi'}]); print('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
