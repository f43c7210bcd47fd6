"""Pages hold layout only: every page imports streamlit, ui.* and the standard library, nothing of engine/; and every
lab job a page names exists in the registry (a misspelt name fails here, not when a student presses a button)."""
import ast
import sys

import pytest

from engine.serving.scheduling import lab_jobs as jobs
from tests import ROOT

PAGES = sorted((ROOT / "pages").rglob("*.py"))


def _imports(tree: ast.AST) -> list[str]:
    names = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
    return names + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


def _allowed(module: str) -> bool:
    top = module.split(".")[0]
    return top in ("streamlit", "ui") or top in sys.stdlib_module_names


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_a_page_imports_only_streamlit_ui_and_the_standard_library(page):
    wrong = [m for m in _imports(ast.parse(page.read_text())) if not _allowed(m)]
    assert not wrong, f"{page.name} imports {wrong}: move the computation into a ui builder (ui/text, ui/figures)"


def _lab_names(tree: ast.AST) -> set[str]:
    """The strings a page names lab jobs with: the job argument of job_progress.lab_run and of the page's own helpers
    that pass one on (any string of the form 'family.name' whose family is a registered job's)."""
    families = {name.split(".")[0] for name in jobs.REGISTRY}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.count(".") == 1 and node.value.split(".")[0] in families and " " not in node.value}


def test_pages_name_only_registered_lab_jobs():
    """One registry (engine/serving/scheduling/lab_jobs.py): a page names a job by its key, and a misspelt key fails
    here, not when a student presses a button."""
    named = {(page.name, name) for page in PAGES for name in _lab_names(ast.parse(page.read_text()))}
    assert len({name for _, name in named}) >= 10, "the lab pages start their measurements by registered names"
    for page, name in named:
        assert name in jobs.REGISTRY, f"{page} names the lab job '{name}', which is not registered"


def test_a_misspelt_lab_job_is_caught_by_the_name_check():
    assert _lab_names(ast.parse('job_progress.lab_run("k", True, "sweeps.prompt_length")')) == {"sweeps.prompt_length"}
    assert "sweeps.prompt_length" not in jobs.REGISTRY
