"""The model cache on disk: where it is, and how a folder of weights gets into it whole or not at all.

Both the bundled SmolLM2's conversion (model_store.py) and the tiny random models (tiny.py) write here the same way:
into a `.converting-<pid>-*` folder beside the target, `COMPLETE` last, then one rename into place. A reader who
sees `COMPLETE` sees a whole copy; a writer killed half-way leaves a folder that the next start sweeps away.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

MARK = "COMPLETE"  # written last: a folder without it is half a copy


class CacheNotWritable(OSError):
    """The cache's folder could not be made or written to (before any work was done)."""


def cache_root() -> Path:
    return Path(os.environ.get("TWO_BENDS_CACHE") or Path.home() / ".cache" / "two-bends")


def complete(folder: Path) -> bool:
    return (folder / MARK).is_file()


def write_folder(target: Path, fill: Callable[[Path], None]) -> None:
    """Make `target` whole: fill(tmp) writes the files into a fresh temporary folder beside it, which is then marked
    complete, opened to other users and renamed into place (an incomplete `target` is replaced; when another process
    put a complete one there first, that one stays). Raises CacheNotWritable, before fill runs, when the cache
    cannot be written."""
    try:  # fail in a second, not after a long fill
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_conversions(target.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".converting-{os.getpid()}-", dir=target.parent))
    except OSError as exc:
        raise CacheNotWritable(exc.errno, exc.strerror, exc.filename) from None
    try:
        fill(tmp)
        (tmp / MARK).write_text("written\n")
        make_readable(tmp)
        if target.exists() and not complete(target):
            shutil.rmtree(target)  # an older or broken copy
        try:
            os.replace(tmp, target)
        except OSError:  # another process put its copy there first
            if not complete(target):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_weights(model, folder: Path, config: dict) -> None:
    """A transformers model's weights as model.safetensors (a tied head left out: it is the embedding, and
    safetensors refuses shared tensors) and `config` as config.json."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def read_weights(folder: Path) -> tuple[SimpleNamespace, dict]:
    """(config.json as attributes, the state dict): no transformers import."""
    from safetensors.torch import load_file

    config = SimpleNamespace(**json.loads((folder / "config.json").read_text()))
    return config, load_file(folder / "model.safetensors")


def clean_stale_conversions(parent: Path | None = None) -> None:
    """Remove `.converting-<pid>-*` folders left by a writer that was killed (up to 270 MB each)."""
    parent = parent or cache_root()
    for folder in parent.glob(".converting-*") if parent.is_dir() else ():
        pid = folder.name.split("-")[1]  # ".converting-<pid>-<random>"
        alive = pid.isdigit() and _process_alive(int(pid))
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def make_readable(folder: Path) -> None:
    """mkdtemp creates 0700: open the finished cache to other users like any installed file (0755 / 0644)."""
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)
