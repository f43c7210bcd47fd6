"""gpu_check: every check's result on disk as it finishes, a failed or crashed check makes the exit status non-zero."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from engine.labs import gpu_check
from engine.labs.gpu_check import Checks
from tests import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def lines(out) -> list[str]:
    return (out / "gpu_check.txt").read_text().splitlines()


def test_each_result_is_written_before_the_next_check_starts(tmp_path):
    checks = Checks(tmp_path)
    seen = []

    def second():
        seen.append(lines(tmp_path))  # what a crash right now would leave behind
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")

    checks.check("parity-llama", lambda: (False, "max |logit diff| 3.1e-01", {"max_logit_diff": 0.31}))
    checks.check("graphs-float32", second)
    checks.check("bench-float32", lambda: (None, "decode 1.2 ms", {"decode_ms": 1.2}))
    assert seen == [["FAIL parity-llama: max |logit diff| 3.1e-01 (0.0 s)"]]
    assert lines(tmp_path)[1].startswith("FAIL graphs-float32: raised RuntimeError: CUDA error: an illegal memory")
    assert lines(tmp_path)[2].startswith("INFO bench-float32")  # a measurement neither passes nor fails
    records = [json.loads(line) for line in (tmp_path / "gpu_check.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in records] == ["FAIL", "FAIL", "INFO"] and records[2]["numbers"] == {"decode_ms": 1.2}
    assert checks.finish() == 1 and lines(tmp_path)[-1] == "# 0 checks passed, 2 failed"
    assert json.loads((tmp_path / "gpu_check.json").read_text())["bench-float32"] == {"decode_ms": 1.2}


def test_all_passing_exits_zero(tmp_path):
    checks = Checks(tmp_path)
    checks.check("parity-gpt2", lambda: (True, "ok", {}))
    assert checks.finish() == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_is_a_failure_with_a_line(tmp_path):
    assert gpu_check.main(["--out", str(tmp_path)]) == 2
    assert lines(tmp_path) == ["FAIL cuda: no CUDA GPU here (or this torch is a CPU build); this check only makes "
                               "sense on one"]


def test_main_exits_non_zero_when_a_graph_check_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Simulated GPU")

    def run_all(checks, device):
        checks.check("graphs-tiny-llama", lambda: (False, "same tokens: False (first differs at token 7)", {}))

    monkeypatch.setattr(gpu_check, "run_all", run_all)
    assert gpu_check.main(["--out", str(tmp_path)]) == 1
    assert lines(tmp_path)[1].startswith("FAIL graphs-tiny-llama") and lines(tmp_path)[-1].endswith("1 failed")


# ------------------------------------------------------------------ the shell script around it
FAKE_PYTHON = """#!/bin/sh
# a Python whose torch 'sees a GPU' and whose checks fail: the script must pass the failure on
case "$*" in
  *"engine.labs.gpu_check"*) exec {py} -c '
import sys, torch
from engine.labs import gpu_check
torch.cuda.is_available = lambda: True
torch.cuda.get_device_name = lambda *a: "Simulated GPU"
def run_all(checks, device):
    checks.check("parity-gpt2", lambda: (True, "ok", {{}}))
    checks.check("graphs-float32", lambda: (False, "same tokens: False", {{}}))
gpu_check.run_all = run_all
sys.exit(gpu_check.main(sys.argv[1:]))' "${{@:3}}" ;;
  *"torch.cuda.is_available"*) exit 0 ;;
  *) exec {py} "$@" ;;
esac
"""


def run_script(tmp_path, with_driver: bool, python: str = sys.executable) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if with_driver:
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\necho 'name, memory.total, driver_version'\necho 'Simulated GPU, 1 MiB, 0'\n")
        smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OUT=str(tmp_path / "out"), PYTHON=python,
               LIMIT_S="120")
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_script_without_a_driver_or_cuda_fails_and_says_why(tmp_path):
    no_driver = run_script(tmp_path, with_driver=False)
    if no_driver.returncode == 2 and "nvidia-smi" in no_driver.stderr:
        assert lines(tmp_path / "out") == ["FAIL nvidia-smi: no NVIDIA driver on this machine"]
    cpu_torch = run_script(tmp_path, with_driver=True)
    assert cpu_torch.returncode == 2, cpu_torch.stderr
    assert lines(tmp_path / "out")[-1].startswith("FAIL cuda: this torch cannot see a CUDA GPU")
    assert "torch " in (tmp_path / "out" / "environment.txt").read_text()  # versions written before any check


def test_script_exits_non_zero_when_a_check_fails(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(textwrap.dedent(FAKE_PYTHON.format(py=sys.executable)).replace("#!/bin/sh", "#!/bin/bash", 1))
    fake.chmod(0o755)
    result = run_script(tmp_path, with_driver=True, python=str(fake))
    assert result.returncode == 1, result.stdout + result.stderr
    assert [line.split(":")[0] for line in lines(tmp_path / "out")[1:]] == \
        ["PASS parity-gpt2", "FAIL graphs-float32", "# 1 checks passed, 1 failed"]
