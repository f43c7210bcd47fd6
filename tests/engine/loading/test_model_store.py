"""The converted-model cache: stale folders removed, finished ones readable, unreadable ones explained; a model
that cannot be loaded (nothing, a file, a missing or damaged folder) is one line naming why."""
import os
from pathlib import Path

import pytest

import engine
from engine.errors import EngineError
from engine.loading import model_store
from engine.loading.model_store import load_checkpoint


def test_stale_conversion_folders_are_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    dead = tmp_path / ".converting-999999999-abcd"  # no such process
    old_style = tmp_path / ".converting-xyz123"  # from the first landing, which wrote no pid
    mine = tmp_path / f".converting-{os.getpid()}-efgh"  # a conversion still running in this process
    for folder in (dead, old_style, mine):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 10)
    model_store.clean_stale_conversions()
    assert not dead.exists() and not old_style.exists() and mine.exists()


def test_finished_cache_is_readable_by_other_users(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / "config.json").write_text("{}")
    (folder / "config.json").chmod(0o600)
    model_store._make_readable(folder)
    assert folder.stat().st_mode & 0o777 == 0o755
    assert (folder / "config.json").stat().st_mode & 0o777 == 0o644


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
