"""The words match the code: the default model named once, the bind address the README promises, documents and
paths the text cites exist, no dated measurement logs in module docstrings, Longmen Bay named, chunked prefill
described as what it does."""
import ast
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.loading import model_store
from ui.text import diagnosis

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "scripts" / "dashboard.sh"


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines() if line]


# ---------------------------------------------------------------- the default model: one constant
def test_default_model_name_is_typed_once():
    name = model_store.DEFAULT_MODEL
    literal = re.compile(r"""["']""" + re.escape(name) + r"""["']""")
    typed = [f"{p.relative_to(ROOT)}:{n}" for p in tracked("*.py") if not p.relative_to(ROOT).parts[0] == "tests"
             for n, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert typed == ["engine/loading/model_store.py:" + str(_line_of(ROOT / "engine/loading/model_store.py", literal))]


def _line_of(path: Path, pattern: re.Pattern) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line))


def test_every_default_is_the_constant():
    import argparse
    import inspect

    from engine import cli
    from engine.loading.loader import load_model
    from engine.serving.scheduling.work import ModelSpec

    assert inspect.signature(load_model).parameters["name_or_path"].default == model_store.DEFAULT_MODEL
    assert ModelSpec().name == model_store.DEFAULT_MODEL
    parser = argparse.ArgumentParser()
    cli._add_model_args(parser)
    assert parser.parse_args([]).model == model_store.DEFAULT_MODEL


# ---------------------------------------------------------------- the dashboard binds this machine unless told
def dashboard(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TWO_BENDS_")}
    return subprocess.run(["bash", str(DASHBOARD), "--dry-run", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=60)


def test_dashboard_binds_localhost_by_default():
    out = dashboard()
    assert out.returncode == 0, out.stderr
    assert "--server.address 127.0.0.1" in out.stdout and "0.0.0.0" not in out.stdout


def test_dashboard_room_binds_every_interface_and_warns():
    out = dashboard("--room", "--mode", "batch")
    assert out.returncode == 0, out.stderr
    assert "--server.address 0.0.0.0" in out.stdout and "127.0.0.1" not in out.stdout
    assert "join code" in out.stderr.lower() and "TWO_BENDS_ROOM=1" in out.stdout


def test_dashboard_room_codes_get_one_clear_line():
    short = dashboard("--room", "--code", "ab-c")
    assert short.returncode == 2 and "--code needs 4 to 64 letters or digits (got 3)" in short.stderr
    alone = dashboard("--teacher-code", "VALLEY9")
    assert alone.returncode == 2 and "add --room" in alone.stderr


def test_dashboard_keeps_an_explicit_address():
    out = dashboard("--server.address", "10.1.2.3", "--server.port", "8600")
    assert out.returncode == 0, out.stderr
    assert "--server.address 10.1.2.3" in out.stdout and "127.0.0.1" not in out.stdout


def test_readme_says_what_the_script_does():
    readme = (ROOT / "README.md").read_text()
    assert "--room" in readme and "127.0.0.1" in readme
    assert "only when `--server.address 0.0.0.0` is given" not in readme


# ---------------------------------------------------------------- cited files and paths exist
def test_documents_cited_in_code_exist():
    cited = {(p.relative_to(ROOT), m) for p in tracked("engine/*.py", "ui/*.py", "pages/*.py", "scripts/*")
             for m in re.findall(r"\b([A-Z][A-Za-z_]*\.md)\b", p.read_text())}
    assert [c for c in cited if not (ROOT / c[1]).is_file()] == []


def test_readme_paths_exist():
    readme = (ROOT / "README.md").read_text()
    paths = set(re.findall(r"(?<![\w./~-])((?:engine|ui|pages|scripts|assets|tests)/[\w./{},-]*[\w/}])", readme))
    missing = []
    for path in paths:
        for one in _expand(path):
            if "*" not in one and not (ROOT / one).exists():
                missing.append(one)
    assert sorted(missing) == []
    assert "app_pages" not in readme


def _expand(path: str) -> list[str]:
    """engine/serving/{scheduling,client} -> both paths."""
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [x for part in m.group(1).split(",") for x in _expand(path[:m.start()] + part + path[m.end():])]


def test_gpu_run_is_described_for_any_nvidia_machine():
    for path in ("README.md", "scripts/gpu_check.sh", "engine/labs/gpu_check.py"):
        text = (ROOT / path).read_text()
        assert not re.search(r"\blent\b", text), path
    readme = (ROOT / "README.md").read_text()
    assert "records GPU traces into `assets/traces/`" not in readme


# ---------------------------------------------------------------- no dated measurement logs in module docstrings
def test_no_dated_logs_in_module_docstrings():
    dated = [str(p.relative_to(ROOT)) for p in tracked("engine/*.py", "ui/*.py", "pages/*.py", "app.py")
             if re.search(r"\b20\d\d-\d\d-\d\d\b", ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert dated == []


def test_pages_and_texts_keep_no_dated_measurements():
    """A ratio measured on another machine on some day (the Timing page's old page-vs-CLI log) is no measurement
    of this one: no page or text builder carries a date."""
    dated = [str(p.relative_to(ROOT)) for p in tracked("pages/*.py", "ui/text/*.py", "assets/polls/*")
             if re.search(r"\b20\d\d-\d\d-\d\d\b", p.read_text())]
    assert dated == []


def test_widgets_keeps_no_measurement_log():
    assert "4-5 s of CPU" not in (ROOT / "ui/controls/widgets.py").read_text()


def test_ui_docstring_names_where_streamlit_lives():
    import ui

    doc = ui.__doc__
    streamlit_modules = [p.relative_to(ROOT) for p in tracked("ui/*.py")
                         if re.search(r"^(import streamlit|from streamlit)", p.read_text(), re.M)
                         and p.name != "__init__.py"]
    assert streamlit_modules
    assert all(str(m.parent) in doc for m in streamlit_modules), streamlit_modules


def test_kv_cache_credits_the_references_rightly():
    from engine.core import kv_cache

    assert "(as in gpt-fast and nano-vllm)" not in kv_cache.__doc__


# ---------------------------------------------------------------- Longmen Bay and chunked prefill
def summary(prefill_share: float) -> SimpleNamespace:
    return SimpleNamespace(prefill_share=prefill_share, prompt_tokens=100, ttft_s=1.0, prefill_tokens_per_s=100.0,
                           output_tokens=10, decode_s=1.0, tpot_s=0.1, total_s=2.0)


def test_diagnosis_names_longmen_bay():
    assert "Longmen Bay" in diagnosis.diagnose(summary(0.9)).headline


@pytest.mark.parametrize("share", [0.9, 0.1, 0.5])
def test_batching_and_chunked_prefill_are_the_servers_remedies_not_this_requests(share):
    """Batching raises throughput and lengthens this request's TTFT; chunked prefill protects other riders' ITL and
    lengthens the chunked prompt's TTFT: neither is ever listed as helping (or as wasted on) this request."""
    d = diagnosis.diagnose(summary(share))
    mine = [(name + why).lower() for name, why in d.helps + d.wasted]
    assert not any("batching" in text or "chunked" in text for text in mine)
    server = {name: why for name, why in d.server}
    assert "TTFT gets longer" in server["Batching requests"] and "tokens/s" in server["Batching requests"]
    chunked = server["Chunked prefill"]
    assert "ITL" in chunked and "1444 → 519 ms" in chunked and "TTFT" in chunked and "longer" in chunked
    assert "shorten ttft" not in chunked.lower() and "shortens ttft" not in chunked.lower()


def test_prefill_is_never_called_compute_bound_without_its_condition():
    """Every sentence the class reads that calls prefill (the valley) compute-bound names the ridge it must pass."""
    from ui.text import glossary, story_text
    from ui.text import roofline_numbers as rn
    texts = [story_text.HOME_VALLEY, story_text.PREFILL_INTRO, rn.INTRO, glossary.markdown()]
    texts += [why for name, why in diagnosis.PREFILL_REMEDIES + diagnosis.WASTED_ON_PREFILL]
    for text in texts:
        for sentence in re.split(r"(?<=[.;])\s", text):
            if "compute-bound" in sentence and ("prefill" in sentence.lower() or "valley" in sentence.lower()):
                assert "ridge" in sentence or "long enough" in sentence or "passes" in sentence, sentence


def test_no_page_says_a_decode_step_costs_the_same_at_any_context():
    from ui.figures import fig_sweeps
    from ui.text import lab_text
    source = (ROOT / "ui/figures/fig_sweeps.py").read_text() + (ROOT / "ui/text/lab_text.py").read_text()
    assert "about the same at any context" not in source and "hardly moves as the context grows" not in source
    assert not hasattr(lab_text, "DECODE_FLAT")
    assert "KV cache" in fig_sweeps.decode_latency_figure([]).layout.title.text


@pytest.fixture
def app(navigation_only):
    from streamlit.testing.v1 import AppTest

    from ui import state

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    return at.run()


def test_home_and_prefill_name_longmen_bay(app):
    assert not app.exception
    assert any("Longmen Bay" in m.value for m in app.markdown)
    app.switch_page("pages/story/prefill.py").run()
    assert not app.exception
    assert "Longmen Bay" in app.title[0].value
