"""Pages hold layout only: every page imports streamlit, ui.* and the standard library, nothing of engine/; and every
lab job a page names exists in the registry (a misspelt name fails here, not when a student presses a button)."""
import ast
import sys

import pytest

from engine.serving.scheduling import lab_jobs as jobs
from tests import ROOT
from ui.engine_link import lab_jobs

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


def test_pages_name_only_registered_lab_jobs():
    named = {(page.name, node.attr) for page in PAGES for node in ast.walk(ast.parse(page.read_text()))
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lab_jobs"}
    assert named, "the lab pages start their measurements through ui.engine_link.lab_jobs"
    for page, name in named:
        job = getattr(lab_jobs, name, None)
        assert job is not None, f"{page} names lab_jobs.{name}, which does not exist"
        assert name == "LabJob" or jobs.REGISTRY.get(job.name) is job, f"{page}: lab_jobs.{name} is not registered"


def test_the_ui_re_exports_every_registered_job():
    exported = {getattr(lab_jobs, n).name for n in lab_jobs.__all__ if n != "LabJob"}
    assert exported == set(jobs.REGISTRY)
