"""The glossary's terms: the ones a lecture uses, defined as the dashboard's metrics are measured."""
from ui.text import glossary


def test_every_term_the_lecture_uses_is_defined_once():
    names = [t.name for t in glossary.TERMS]
    assert len(names) == len(set(names))
    for term in ("TTFT", "TPOT", "ITL", "KV cache", "GEMM / GEMV", "MFU", "Roofline", "Prefill", "Decode"):
        assert term in names
    assert all(t.meaning.endswith(".") and t.where for t in glossary.TERMS)


def test_definitions_follow_the_metrics():
    by_name = {t.name: t for t in glossary.TERMS}
    assert "(end-to-end time − TTFT) / (output tokens − 1)" in by_name["TPOT"].meaning  # as vLLM's benchmarks
    assert "prefill" in by_name["TTFT"].meaning and "first" in by_name["TTFT"].meaning
    assert "compute-bound only above the device's ridge point" in by_name["Prefill"].meaning  # said conditionally
    assert "memory-bound at small batch" in by_name["Decode"].meaning
    md = glossary.markdown()
    assert md.count("\n- ") + 1 == len(glossary.TERMS) and "**TTFT** (time to first token)" in md


def test_the_physics_is_said_where_it_holds():
    """GEMV intensity per dtype, TPOT growing with the context, the ridge range from the card presets."""
    from engine.perfmodel.roofline import HARDWARE_PRESETS
    by_name = {t.name: t for t in glossary.TERMS}
    assert "0.5 FLOP/byte in float32, 1 in bf16, 2 in int8" in by_name["Arithmetic intensity"].meaning
    assert "about 1–2" not in by_name["Arithmetic intensity"].meaning
    assert "barely depends" not in by_name["TPOT"].meaning and "grows with the context" in by_name["TPOT"].meaning
    gpus = [h.ridge for h in HARDWARE_PRESETS.values() if "CPU" not in h.name]
    ridge = by_name["Ridge point"].meaning
    assert f"{min(gpus):,.0f} FLOP/byte" in ridge and f"{max(gpus):,.0f}" in ridge
