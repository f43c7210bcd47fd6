"""A converted model's tokenizer read with the `tokenizers` library alone: no transformers import at start.

The engine uses four things of transformers' `PreTrainedTokenizerFast`, kept here with transformers' meaning
(why: docs/decisions/tokenizer-without-transformers.md):

- `encode(text, add_special_tokens)`, `decode(ids, skip_special_tokens)`: the Rust tokenizer's own;
- `eos_token_id`, `bos_token_id`, `pad_token_id` from the special tokens named in tokenizer_config.json;
- `chat_template` and `apply_chat_template`: rendered with jinja2 in a sandbox set up as transformers sets it up
  (trim_blocks, lstrip_blocks, loop controls, `raise_exception`), then encoded without special tokens.

Models loaded by Hugging Face id (GPT-2 online) keep transformers' AutoTokenizer, which has the same members.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from engine.errors import EngineError

SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


class PlainTokenizer:
    """encode / decode / special ids / chat template over a `tokenizers.Tokenizer`. Pickles (the worker sends it): one
    read from a folder pickles as that folder and its tokenizer.json's size and time (`read_cached` on the other side:
    the dashboard reads it while the worker still loads the weights, instead of rebuilding 1.5 MB of vocabulary from
    the pickle, ~0.16 s, after); one built otherwise pickles whole."""

    def __init__(self, backend, special_tokens: dict[str, str], chat_template: str | None = None,
                 folder: Path | None = None):
        self.backend = backend  # tokenizers.Tokenizer
        self.special_tokens = dict(special_tokens)  # {"eos_token": "<|im_end|>", ...}
        self.chat_template = chat_template
        self.folder = folder  # where it was read from (None: built otherwise)
        self._template = None  # compiled jinja2 template, made on first use (not pickled)

    @classmethod
    def from_folder(cls, folder: Path) -> PlainTokenizer:
        """Read tokenizer.json, the special tokens and the chat template that `save_pretrained` wrote."""
        from tokenizers import Tokenizer

        folder = Path(folder)
        config_file = folder / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        special = {name: token for name in SPECIAL_NAMES if (token := _content(config.get(name)))}
        template_file = folder / "chat_template.jinja"
        template = template_file.read_text() if template_file.is_file() else config.get("chat_template")
        if template is not None and not isinstance(template, str):
            raise EngineError(f"{config_file} names several chat templates; this engine reads one")
        return cls(Tokenizer.from_file(str(folder / "tokenizer.json")), special, template, folder)

    # --- text <-> ids -------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        ids = [ids] if isinstance(ids, int) else [int(i) for i in ids]
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def __len__(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    # --- special tokens -----------------------------------------------------------------------------------------
    def _id(self, name: str) -> int | None:
        token = self.special_tokens.get(name)
        return None if token is None else self.backend.token_to_id(token)

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens.get("bos_token")

    @property
    def eos_token_id(self) -> int | None:
        return self._id("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._id("bos_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._id("pad_token")

    # --- chat ---------------------------------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False, tokenize: bool = True,
                            return_dict: bool = False):
        """The conversation rendered by the model's template; ids (encoded without special tokens) or the text."""
        if not self.chat_template:
            raise EngineError("this tokenizer has no chat template")
        if self._template is None:
            self._template = _compile(self.chat_template)
        from jinja2.exceptions import TemplateError

        try:
            text = self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                         **self.special_tokens)
        except TemplateError as exc:
            raise EngineError(f"the model's chat template refused this conversation: {exc}") from None
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)
        return {"input_ids": ids} if return_dict else ids

    def __reduce__(self):
        stamp = _stamp(self.folder) if self.folder is not None else None
        if stamp is not None:  # the files it came from, unchanged: the other side reads them (or has already)
            return read_cached, (str(self.folder), stamp)
        return PlainTokenizer, (self.backend, self.special_tokens, self.chat_template)

    def __repr__(self) -> str:
        return f"PlainTokenizer(vocab={len(self)}, special={self.special_tokens}, chat={bool(self.chat_template)})"


def _stamp(folder: Path) -> tuple[int, int] | None:
    """tokenizer.json's size and modification time (ns); None when it cannot be read."""
    try:
        st = (Path(folder) / "tokenizer.json").stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _read(folder: str, stamp: tuple[int, int]) -> PlainTokenizer:
    return PlainTokenizer.from_folder(Path(folder))


def read_cached(folder: str, stamp: tuple[int, int] | None = None) -> PlainTokenizer:
    """The tokenizer in `folder`, read once per process for each version of its files (the worker's pickles name
    theirs: `stamp`); the dashboard's launcher reads the default model's early. Shared: it is only read from."""
    now = _stamp(Path(folder))
    if now is None:
        raise EngineError(f"the tokenizer in {folder} cannot be read any more (was the model cache removed?)")
    if stamp is not None and tuple(stamp) != now:  # changed since the worker read it: read what is there now
        return PlainTokenizer.from_folder(Path(folder))
    return _read(str(folder), now)


def _content(token) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or {"content": ...} (older files)."""
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) and token else None


def _compile(source: str):
    """A chat template in a sandbox, with the settings and helpers chat templates are written against."""
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)
