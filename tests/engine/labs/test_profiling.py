"""Where the time goes: the profiler sees GEMM in prefill and GEMV in decode."""
import pytest

from engine.labs.profiling import KIND_GEMM, KIND_GEMV, KIND_OUTSIDE, classify_kind, matmul_rows, profile_phases


def test_classify_by_shapes():
    assert matmul_rows("aten::mm", [[256, 576], [576, 1536]]) == 256
    assert matmul_rows("aten::addmm", [[1536], [1, 576], [576, 1536]]) == 1
    assert classify_kind("aten::mm", [[256, 576], [576, 1536]]) == KIND_GEMM
    assert classify_kind("aten::addmm", [[1536], [1, 576], [576, 1536]]) == KIND_GEMV
    assert classify_kind("aten::_weight_int8pack_mm", [[1, 64], [128, 64], [128]]) == KIND_GEMV
    assert classify_kind("aten::_scaled_dot_product_flash_attention_for_cpu", []) == "attention kernel"
    assert classify_kind("aten::add", [[1, 2], [1, 2]]) == "other ops"


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gpt2"])
def test_prefill_is_gemm_decode_is_gemv(request, name):
    lm = request.getfixturevalue(name)
    seen = []
    r = profile_phases(lm, n_prompt=32, decode_steps=2, progress=lambda m, f: seen.append(f))
    assert seen and seen == sorted(seen)
    pre, dec = r.prefill, r.decode
    assert pre.by_kind[KIND_GEMM] > 0 and dec.by_kind[KIND_GEMM] == 0
    assert dec.by_kind[KIND_GEMV] > 0
    gemm_parts = {o.part for o in pre.ops if o.kind == KIND_GEMM}
    assert {"attention", "MLP"} <= gemm_parts
    assert any(o.part == "LM head" for o in dec.ops if o.kind == KIND_GEMV)
    for ph in (pre, dec):
        assert ph.by_kind[KIND_OUTSIDE] >= 0
        assert abs(sum(ph.by_kind.values()) - sum(ph.by_part.values())) < 1e-6
        assert ph.ops == sorted(ph.ops, key=lambda o: o.self_ms, reverse=True)
    assert dec.passes == 2 and pre.rows_in == 32
    # the same request timed again on a Run's path, without the profiler: 3 runs of one prefill and 2 steps
    assert len(r.run_timings) == 3 and all(len(t.step_s) == 2 and t.reused_tokens == 0 for t in r.run_timings)
    assert r.run_path and r.profiled_path
