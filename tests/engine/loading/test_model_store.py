"""The converted-model cache: an unreadable one explained (how folders are written: test_cache_folder.py); a model
that cannot be loaded (nothing, a file, a missing or damaged folder) is one line naming why."""
from pathlib import Path

import pytest

import engine
from engine.errors import EngineError
from engine.loading import model_store
from engine.loading.model_store import load_checkpoint


def test_unreadable_cache_gives_a_clear_message(monkeypatch, tmp_path):
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    from safetensors.torch import load_file  # noqa: F401  (imported before reads are refused: importing
    from transformers import PreTrainedTokenizerFast  # noqa: F401  transformers reads package metadata files)

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(engine.EngineError, match="not readable by this user .* set TWO_BENDS_CACHE"):
        model_store._load_folder(tmp_path, "SmolLM2")


@pytest.mark.parametrize("what, make, says", [
    ("nothing", lambda tmp: "  ", "no model given: name one such as"),
    ("a file", lambda tmp: _file(tmp / "weights.bin"), "is a file; a local model is a folder"),
    ("a missing folder", lambda tmp: str(tmp / "gone"), "there is no folder"),
    ("a folder without config", lambda tmp: str(tmp), "has no config.json"),
    ("a damaged config", lambda tmp: _folder(tmp, '{"model_type": "llama", "hidden_size": "wide"}'),
     "is not a checkpoint transformers can read"),
    ("config but no weights", lambda tmp: _folder(tmp, '{"model_type": "llama"}'), "is not a checkpoint transformers can read"),
    ("not JSON", lambda tmp: _folder(tmp, "model_type: llama"), "is not a checkpoint transformers can read"),
])
def test_a_model_that_cannot_be_loaded_is_one_line_naming_why(tmp_path, what, make, says):
    with pytest.raises(EngineError) as info:
        load_checkpoint(make(tmp_path))
    assert says in str(info.value) and "\n" not in str(info.value), str(info.value)


def _file(path):
    path.write_bytes(b"\0" * 16)
    return str(path)


def _folder(tmp, config: str):
    (tmp / "config.json").write_text(config)
    return str(tmp)
