"""llama.cpp as a column of `engine bench` (engine/labs/bench_llamacpp.py).

The tests marked `alone` need llama.cpp's venv and GGUF files (bash scripts/setup_llamacpp.sh: a source build, many
minutes on 2 cores, which the suite never starts): without them they skip, saying so. The rest run everywhere."""
import sys
from types import SimpleNamespace

import pytest

from engine.errors import EngineError
from engine.labs import bench_llamacpp
from engine.labs.bench import header, row, start_llamacpp
from engine.loading.model_store import DEFAULT_MODEL


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
def test_the_bench_starts_llamacpp_times_it_and_compares_its_greedy_tokens(smollm):
    """The column's pieces as `engine bench` runs them (start_llamacpp, ttft, decode_step, compare_greedy, the row);
    the whole bench (transformers, plain, the floors) is a benchmark, not a test."""
    require_llamacpp("f32")
    from engine.labs.sweeps import prompt_ids_of_length

    args = SimpleNamespace(model=DEFAULT_MODEL, no_llamacpp=False, llamacpp_type=None)
    peer = start_llamacpp(args, smollm)  # float32: the f32 file
    assert peer is not None
    try:
        assert peer.info["kv_type"] == "f32" and peer.info["flash_attn"] == "off"
        ids = prompt_ids_of_length(smollm, 32)
        seconds = {"llama.cpp": peer.ttft(ids), "fast": 0.01}
        assert 0 < seconds["llama.cpp"] < 60
        line = row("prefill 32 tokens", seconds, None)
        assert f"{seconds['llama.cpp'] * 1000:.1f}" in line
        assert 0 < peer.decode_step(ids, 4) < 60
        got = bench_llamacpp.compare_greedy(smollm, peer, ids, 8)
    finally:
        peer.stop()
    assert got["first_difference"] is None, got  # float32 on both sides, the same weights
    assert got["logit_gap"] < 1e-4  # summed in other orders: 1-3e-6 (6.6e-4 with llama.cpp's flash attention, which
    # rounds float32 keys and values to f16: the column keeps it off for f32)
