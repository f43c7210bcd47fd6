"""llama.cpp as a column of `engine bench` (engine/labs/bench_llamacpp.py).

The tests marked `alone` need llama.cpp's venv and GGUF files (bash scripts/setup_llamacpp.sh: a source build, many
minutes on 2 cores, which the suite never starts): without them they skip, saying so. The rest run everywhere."""
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from engine.errors import EngineError
from engine.labs import bench_llamacpp
from engine.labs.bench import header, row, start_llamacpp
from engine.loading.model_store import DEFAULT_MODEL
from tests import ROOT


def require_llamacpp(gguf_type: str = "f32") -> None:
    why = bench_llamacpp.available(DEFAULT_MODEL, gguf_type)
    if why:
        pytest.skip(why)


def test_the_llamacpp_column_lines_up_under_its_header_with_fasts_ratio_to_it():
    line = row("prefill 128 tokens", {"fast": 0.2, "plain": 0.3, "hf": 0.25, "llama.cpp": 0.4}, 0.1)
    head = header()
    assert len(line) == len(head)
    at = head.index("llama.cpp ms") + len("llama.cpp ms")
    assert line[:at].endswith("400.0")  # the value ends where its header does
    at = head.index("fast/llama.cpp") + len("fast/llama.cpp")
    assert line[:at].endswith("0.50")
    assert line[head.index("vLLM ms"):head.index("vLLM ms") + len("vLLM ms")].strip() == "-"


def test_without_its_venv_the_bench_says_why_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench_llamacpp, "VENV", tmp_path / "no-venv")
    args = SimpleNamespace(model=DEFAULT_MODEL, no_llamacpp=False, llamacpp_type=None)
    assert start_llamacpp(args, SimpleNamespace(device=SimpleNamespace(type="cpu"), dtype_name="bfloat16")) is None
    out = capsys.readouterr().out.splitlines()
    assert out == [f"# no llama.cpp column: no llama.cpp venv at {tmp_path / 'no-venv'} (bash scripts/setup_llamacpp.sh "
                   "builds it)"]
    args.no_llamacpp = True
    assert start_llamacpp(args, SimpleNamespace(device=SimpleNamespace(type="cpu"), dtype_name="float32")) is None
    assert capsys.readouterr().out == ""  # left out on request: not a word


def test_available_names_each_missing_piece(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_llamacpp, "VENV", tmp_path / "venv")
    monkeypatch.setattr(bench_llamacpp, "MODELS_DIR", tmp_path / "gguf")
    assert "not tiny-llama" in bench_llamacpp.available("tiny-llama", "f32")
    assert "no q4_1 GGUF" in bench_llamacpp.available(DEFAULT_MODEL, "q4_1")
    assert "no llama.cpp venv" in bench_llamacpp.available(DEFAULT_MODEL, "f32")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / ".two-bends-llamacpp-ready").write_text("stamp\n")
    assert bench_llamacpp.available(DEFAULT_MODEL, "bf16") == f"no {tmp_path / 'gguf' / 'smollm2-135m-bf16.gguf'} " \
                                                              "(bash scripts/setup_llamacpp.sh writes it)"
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / "smollm2-135m-bf16.gguf").write_bytes(b"")
    assert bench_llamacpp.available(DEFAULT_MODEL, "bf16") is None


def test_a_worker_that_dies_is_a_clear_error_quoting_its_log(monkeypatch, tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    worker = tmp_path / "worker.py"
    worker.write_text("import sys\nprint('llama_model_load: error loading model: bad magic', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    monkeypatch.setattr(bench_llamacpp, "VENV", tmp_path)
    monkeypatch.setattr(bench_llamacpp, "WORKER", worker)
    with pytest.raises(EngineError, match=r"worker stopped \(exit code 3\): llama_model_load: error loading model: "
                                          r"bad magic"):
        bench_llamacpp.LlamaCppPeer(2, "f32", progress=lambda s: None)


@pytest.mark.parametrize(("a", "b", "where"), [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 5, 3], 1),
                                                ([1, 2], [1, 2, 3], 2), ([4], [1], 0)])
def test_first_difference(a, b, where):
    assert bench_llamacpp.first_difference(a, b) == where


@pytest.mark.alone
def test_the_bench_shows_the_llamacpp_column(tmp_path):
    require_llamacpp("f32")
    out = subprocess.run([sys.executable, "-m", "engine", "bench", "--quick", "--repeats", "1", "--no-vllm",
                          "--model", DEFAULT_MODEL, "--device", "cpu"],  # the fast paths users get
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert any(x.startswith("# llama.cpp (llama-cpp-python ") and "smollm2-135m-f32.gguf" in x for x in lines)
    head = next(x for x in lines if x.startswith("measurement"))
    end = head.index("llama.cpp ms") + len("llama.cpp ms")
    for label in ("prefill 32 tokens", "prefill 128 tokens", "decode step @ context 32", "decode step @ context 128"):
        line = next(x for x in lines if x.startswith(label))
        assert float(line[:end].split()[-1]) > 0, line
    same = next(x for x in lines if x.startswith("# fast and llama.cpp (f32) give the same 8 greedy tokens: "))
    assert same.split(": ")[1].startswith("True"), same  # float32 on both sides, the same weights
    gap = float(re.search(r"apart by ([\d.e+-]+) of their largest", same).group(1))
    assert gap < 1e-4, same  # summed in other orders: 1-3e-6 (6.6e-4 with llama.cpp's flash attention, which rounds
    # float32 keys and values to f16: the column keeps it off for f32)
