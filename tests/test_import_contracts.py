"""The layer contracts of pyproject.toml ([tool.importlinter]): a wrong-way import or a package loop fails the suite."""
import subprocess
import sys
from pathlib import Path

from tests import ROOT


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
