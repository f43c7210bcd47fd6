"""What starting costs: `import engine` and `engine prepare` on a converted model import no torch (the dashboard
starts with both), while the engine's contract names still resolve on first use (engine/__init__.py)."""
import subprocess
import sys

import engine
from engine.loading.model_store import CACHE_FOLDER
from tests import ROOT


def _run(code: str, **env) -> str:
    import os

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_engine_imports_no_torch_until_a_name_is_used():
    assert _run("import sys, engine; a = 'torch' in sys.modules; engine.KVCache; print(a, 'torch' in sys.modules)") \
        == "False True"


def test_the_contract_names_resolve():
    assert engine.load_model.__module__ == "engine.loading.loader"
    assert {"generate", "prefill", "decode_step", "Trace", "EngineError", "KVCache"} <= set(dir(engine))
    from engine import SamplingParams, generate  # noqa: F401  (from-imports go through the same lookup)


def test_prepare_on_a_converted_model_imports_no_torch(tmp_path):
    (tmp_path / CACHE_FOLDER).mkdir()
    (tmp_path / CACHE_FOLDER / "COMPLETE").write_text("")
    code = "import sys; from engine.cli import main; main(['prepare']); print('torch' in sys.modules)"
    assert _run(code, TWO_BENDS_CACHE=str(tmp_path)).splitlines()[-1] == "False"


def test_the_dashboards_own_modules_import_no_torch():
    """The engine runs in the worker process: the dashboard's process importing torch cost ~2 s of CPU at every start
    (on 2 cores, taken from the worker's own torch import and weights load)."""
    code = ("import sys, importlib, ui.controls.launch as launch; [importlib.import_module(m) for m in launch.APP_MODULES]; "
            "print('torch' in sys.modules)")
    assert _run(code).splitlines()[-1] == "False"


def test_serve_refuses_a_bad_token_budget_before_it_imports_torch():
    code = ("import sys; from engine.cli import main; rc = main(['serve', '--max-num-batched-tokens', '0']); "
            "print(rc, 'torch' in sys.modules)")
    assert _run(code).splitlines()[-1] == "2 False"
