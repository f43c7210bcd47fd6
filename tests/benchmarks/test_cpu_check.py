"""benchmarks/cpu_check.py reads the CPU targets off its steps' numbers: each target's ratio and verdict, the
bfloat16 targets marked where the CPU is not the issue's case, a failed step "not measured" and a non-zero exit."""
import json
import sys

import pytest

from benchmarks import cpu_check


def bench(flags, **rows):
    return dict(date="2026-12-03 16:00", cpu="Test CPU", vector_flags=flags, capability="AVX2", torch="2.13.0",
                threads=2, read_bytes_per_s=30e9, matmul_flops_per_s=180e9, rows=rows)


def ms(fast, plain=None, hf=None, vllm=None, floor=None):
    return {k: v / 1000 for k, v in dict(fast=fast, plain=plain, hf=hf, vLLM=vllm, floor=floor).items() if v}


F32 = bench(["avx", "avx2", "fma"], **{
    "prefill 128": ms(100, 120, 110, 105, 60), "prefill 512": ms(400, 390, 410, 385, 250),
    "prefill 1024": ms(900, 950, 1000, 1000, 600), "decode 128": ms(20, 40, 45, 30, 16),
    "decode 1024": ms(25, 45, 50, 35, 18)})


def by_target(lines):
    return {x["target"]: x for x in lines}


def test_verdicts_have_a_noise_band_and_say_when_nothing_was_measured():
    assert [cpu_check.verdict(r, 1.0) for r in (0.5, 1.0, 1.04, 1.2, None)] == [
        "met", "met", "within 5 %", "missed", "not measured"]
    assert cpu_check.verdict(1.5, 1.5) == "met" and cpu_check.verdict(1.6, 1.5) == "missed"


def test_bench_targets_name_the_worst_row_and_each_vllm_ratio():
    lines = by_target(cpu_check.target_lines({"bench-float32": F32}))
    plain = lines["float32: fast ≤ plain on every row"]
    assert plain["measured"] == "worst fast/plain 1.03 (prefill 512)" and plain["verdict"] == "within 5 %"
    assert lines["float32: fast ≤ hf on every row"]["verdict"] == "met"
    assert lines["float32 decode @ 128 ≤ 1.3x its floor"]["ratio"] == 20 / 16  # 1.25: met
    assert lines["float32 decode @ 1024 ≤ 1.3x its floor"]["verdict"] == "missed"  # 25/18 = 1.39
    assert lines["ours/vLLM ≤ 1.0 on TTFT, 512 tokens"]["verdict"] == "within 5 %"  # 400/385
    assert lines["ours/vLLM ≤ 1.0 on TTFT, 1024 tokens"]["verdict"] == "met"
    assert lines["ours/vLLM ≤ 1.0 on ITL, context 128"]["measured"] == "0.67"
    assert lines["bfloat16: fast ≤ plain on every row"]["verdict"] == "not measured"


def test_a_decode_floor_line_says_the_step_against_a_read_of_its_own_bytes_when_the_bench_timed_it():
    rows = dict(F32["rows"], **{"decode 128": dict(ms(20, 40, 45, 30, 13), read=0.0198)})
    lines = by_target(cpu_check.target_lines({"bench-float32": dict(F32, rows=rows)}))
    timed = lines["float32 decode @ 128 ≤ 1.3x its floor"]
    assert timed["measured"] == "20.0 ms = 1.54x (1.01x torch's read of the same bytes in the step's pieces, same rounds)"
    assert timed["verdict"] == "missed"  # the verdict stays the floor's: the read is context, not a second floor
    assert lines["float32 decode @ 1024 ≤ 1.3x its floor"]["measured"] == "25.0 ms = 1.39x"  # an older bench's row


def test_bfloat16_targets_are_marked_off_the_issues_case_without_avx512_bf16_or_amx():
    rows = {"decode 128": ms(12, 20, 25, None, 10),
            "same greedy tokens": dict(same=False, agree=4, tokens=32)}
    for flags, marked in ((["avx2", "fma"], True), (["avx2", "avx512f", "avx512_bf16"], False),
                          (["avx2", "amx_bf16", "amx_tile"], False)):
        side = {"rows": {"prefill 512": dict(float32=0.400, bfloat16=0.380)}}
        lines = by_target(cpu_check.target_lines({"bench-float32": F32, "bench-bfloat16": bench(flags, **rows),
                                                  "bf16-prompts": side}))
        decode = lines["bfloat16 decode @ 128 ≤ 1.5x its floor"]
        assert decode["verdict"] == "met" and decode["ratio"] == 1.2
        assert ("not the issue's case" in decode["note"]) is marked
        prefill = lines["bfloat16 prefill 512 ≤ float32's (fast)"]
        assert prefill["ratio"] == 0.380 / 0.400 and prefill["verdict"] == "met"
        assert prefill["measured"] == "380 vs 400 ms = 0.95" and ("not the issue's case" in prefill["note"]) is marked
        assert lines["bfloat16 prefill 1024 ≤ float32's (fast)"]["verdict"] == "not measured"
        assert lines["bfloat16 fast and plain: the same greedy tokens"]["measured"] == "no: the first 4 of 32 agree"


def test_serve_start_and_disturbance_targets():
    serve = {"medians": {"in process": dict(ttft=0.200, itl=0.030),
                         cpu_check.WORKER_DEFAULT: dict(ttft=0.240, itl=0.031), "other": dict(ttft=0.1, itl=0.01)}}
    start = {"rounds": [{"Run button usable": s} for s in (4.8, 6.0, 4.2)]}
    page = dict(config="defaults", page_tpot=36.0, page_wait=5.0, page_net=31.0, cli_tpot=28.0, waits_shown=3, rounds=3)
    lines = by_target(cpu_check.target_lines({"serve": serve, "start": start, "disturbance": [page]}))
    ttft = lines[f"behind HTTP (engine serve, --worker {cpu_check.WORKER_DEFAULT}): TTFT ≤ 1.1x in process"]
    assert ttft["verdict"] == "missed" and ttft["measured"] == "240.0 vs 200.0 ms = 1.20x"  # the default worker's
    run = lines["bash scripts/dashboard.sh to a usable Run button ≤ 5 s (median)"]
    assert run["verdict"] == "met" and run["measured"].startswith("4.80 s")
    four = lines["page TPOT ≤ 1.15x the CLI's, or less its shown wait"]
    assert four["ratio"] == 31 / 28 and four["verdict"] == "met"  # 1.29x on its face, 1.11x less the shown wait
    unshown = by_target(cpu_check.target_lines({"disturbance": [dict(page, waits_shown=0)]}))
    assert unshown["page TPOT ≤ 1.15x the CLI's, or less its shown wait"]["verdict"] == "missed"  # no wait shown


def test_a_failed_step_reads_not_measured_and_exits_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "serve.json").write_text(json.dumps({"medians": {}}))  # an earlier run's: must not be read as this one's
    py = sys.executable
    (tmp_path / "f32.json").write_text(json.dumps(F32))
    writes = f"import shutil; shutil.copy({str(tmp_path / 'f32.json')!r}, {str(out / 'bench-float32.json')!r})"
    prints = "import json; print('measuring...'); print(json.dumps([]))"
    monkeypatch.setattr(cpu_check, "steps", lambda o, r, n: {
        "bench-float32": [py, "-c", writes], "disturbance": [py, "-c", prints],
        "serve": [py, "-c", "import sys; print('no server'); sys.exit(3)"]})
    assert cpu_check.main(["--out", str(out)]) == 1
    lines = by_target(json.loads((out / "targets.json").read_text())["targets"])
    assert lines["float32 decode @ 128 ≤ 1.3x its floor"]["verdict"] == "met"
    assert lines[f"behind HTTP (engine serve, --worker {cpu_check.WORKER_DEFAULT}): ITL ≤ 1.1x in process"][
        "verdict"] == "not measured"
    assert not (out / "serve.json").exists() and "no server" in (out / "serve.log").read_text()
    table = (out / "targets.md").read_text()
    assert "Test CPU (avx, avx2, fma" in table and "float32 bench: streaming read 30.0 GB/s, matmul 180 GFLOP/s" in table
    assert "bfloat16 bench" not in table and "| 1 | float32 decode @ 128 ≤ 1.3x its floor | 20.0 ms = 1.25x | met |" in table
    assert "failed: serve" in capsys.readouterr().out


def test_an_unknown_step_is_refused(capsys):
    with pytest.raises(SystemExit) as stopped:
        cpu_check.main(["--steps", "bench-float32,warp"])
    assert stopped.value.code == 2
    assert "unknown step warp" in capsys.readouterr().err
