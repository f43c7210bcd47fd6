"""The launcher (ui/controls/launch.py): it imports nothing heavy before it has spawned the engine worker, spawns one only
when the dashboard will use it, and the worker it spawns reads the same settings the dashboard asks for."""
import subprocess
import sys

import pytest

from engine.serving.scheduling.early_start import options_from_env
from tests import ROOT
from ui.controls import launch
from ui.engine_link import server_link


def test_the_launcher_imports_neither_torch_nor_streamlit_before_it_spawns_the_worker():
    code = "import sys, ui.controls.launch; print(sorted({'torch', 'streamlit', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("env, wanted", [({}, True), ({"TWO_BENDS_WORKER": "process"}, True),
                                         ({"TWO_BENDS_WORKER": "thread"}, False), ({"TWO_BENDS_REPLAY": "1"}, False)])
def test_a_worker_is_spawned_early_only_when_the_dashboard_uses_one(env, wanted):
    assert launch.engine_worker_wanted(env) is wanted


@pytest.mark.parametrize("env", [{}, {"TWO_BENDS_MODE": "batch", "TWO_BENDS_MAX_BATCH": "3", "TWO_BENDS_THREADS": "1",
                                      "TWO_BENDS_MAX_QUEUE": "9", "TWO_BENDS_MAX_NEW_TOKENS": "77",
                                      "TWO_BENDS_MODEL": "tiny-gpt2"}])
def test_the_early_worker_reads_the_settings_the_dashboard_asks_for(monkeypatch, env):
    """server_link.options() decides what the dashboard's worker runs; the early worker must agree, or it is wasted."""
    for name in ("TWO_BENDS_MODE", "TWO_BENDS_MAX_BATCH", "TWO_BENDS_THREADS", "TWO_BENDS_MAX_QUEUE",
                 "TWO_BENDS_MAX_NEW_TOKENS", "TWO_BENDS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert options_from_env() == server_link.options()


def test_the_launcher_imports_what_app_py_imports():
    import ast

    tree = ast.parse((ROOT / "app.py").read_text())
    imported = {f"{node.module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if node.module.startswith("ui.")}
    assert set(launch.APP_MODULES) == imported - {"ui.controls.launch"}


def test_the_server_does_not_walk_every_imported_object_after_each_script_run():
    """A room's pages rerun small fragments every few seconds: a full gc.collect(2) after each one (Streamlit's
    runner.postScriptGC) took ~150 ms of the GIL apiece and starved the server's event loop with nine sessions.
    The project's config turns it off, and the launcher freezes the imports' objects out of the collector."""
    code = ("from streamlit import config; import gc, ui.controls.launch as launch; "
            "launch.import_app_modules_soon(wait_s=0).join(120); "
            "print(config.get_option('runner.postScriptGC'), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    post_gc, frozen = out.stdout.split()
    assert post_gc == "False"
    assert int(frozen) > 50_000  # the app's modules, torch and transformers: far more than a script run makes


def test_the_launcher_reads_the_bundled_models_tokenizer_the_descriptions_name(monkeypatch, tmp_path):
    """The worker's model description names its tokenizer's folder; the launcher has read that folder already."""
    import pickle

    from engine.loading import model_store, tiny, tokenizer_file

    folder = tmp_path / model_store.CACHE_FOLDER
    folder.mkdir()
    tiny.tiny_tokenizer().backend.save(str(folder / "tokenizer.json"))
    worker_side = tokenizer_file.PlainTokenizer.from_folder(folder)
    reads = []
    real = tokenizer_file.PlainTokenizer.from_folder.__func__
    monkeypatch.setattr(tokenizer_file.PlainTokenizer, "from_folder",
                        classmethod(lambda cls, f: reads.append(str(f)) or real(cls, f)))
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    monkeypatch.setenv("TWO_BENDS_MODEL", "tiny-llama")
    launch.read_default_tokenizer()  # another model: nothing read
    monkeypatch.setenv("TWO_BENDS_MODEL", model_store.DEFAULT_MODEL)
    launch.read_default_tokenizer()  # not converted yet (no COMPLETE): nothing read
    assert reads == []
    (folder / "COMPLETE").write_text("")
    launch.read_default_tokenizer()
    assert reads == [str(folder)]
    received = pickle.loads(pickle.dumps(worker_side))  # the description arriving: no second read
    assert reads == [str(folder)] and received is tokenizer_file.read_cached(str(folder))
