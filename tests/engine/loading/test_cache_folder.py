"""The model cache's folders (engine/loading/cache_folder.py): written whole or not at all, an incomplete one replaced,
another writer's complete one kept, an unwritable cache said before any work, stale half-copies swept, finished
copies readable by other users."""
import os

import pytest

from engine.loading import cache_folder


def _fill(text: str):
    def fill(tmp):
        (tmp / "model.safetensors").write_text(text)
    return fill


def test_a_written_folder_is_whole_and_leaves_no_temporary_folder(tmp_path):
    target = tmp_path / "model"
    cache_folder.write_folder(target, _fill("weights"))
    assert cache_folder.complete(target) and (target / "model.safetensors").read_text() == "weights"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_fill_that_fails_leaves_nothing(tmp_path):
    def broken(tmp):
        (tmp / "model.safetensors").write_text("half")
        raise RuntimeError("killed half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        cache_folder.write_folder(tmp_path / "model", broken)
    assert list(tmp_path.iterdir()) == []


def test_an_incomplete_folder_is_replaced_and_a_complete_one_kept(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "model.safetensors").write_text("half a copy")  # no COMPLETE: an older or broken write
    cache_folder.write_folder(target, _fill("new"))
    assert (target / "model.safetensors").read_text() == "new"
    cache_folder.write_folder(target, _fill("second writer"))  # another process finished first: its copy stays
    assert (target / "model.safetensors").read_text() == "new" and len(list(tmp_path.iterdir())) == 1


def test_an_unwritable_cache_is_said_before_the_fill_runs(tmp_path):
    (tmp_path / "file").write_text("")
    ran = []
    with pytest.raises(cache_folder.CacheNotWritable):
        cache_folder.write_folder(tmp_path / "file" / "model", ran.append)
    assert ran == []


def test_stale_conversion_folders_are_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    dead = tmp_path / ".converting-999999999-abcd"  # no such process
    old_style = tmp_path / ".converting-xyz123"  # from the first landing, which wrote no pid
    mine = tmp_path / f".converting-{os.getpid()}-efgh"  # a conversion still running in this process
    for folder in (dead, old_style, mine):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 10)
    cache_folder.clean_stale_conversions()
    assert not dead.exists() and not old_style.exists() and mine.exists()


def test_finished_cache_is_readable_by_other_users(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / "config.json").write_text("{}")
    (folder / "config.json").chmod(0o600)
    cache_folder.make_readable(folder)
    assert folder.stat().st_mode & 0o777 == 0o755
    assert (folder / "config.json").stat().st_mode & 0o777 == 0o644


