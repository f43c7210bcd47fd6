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
    assert "compute-bound" in by_name["Prefill"].meaning and "memory-bound" in by_name["Decode"].meaning
    md = glossary.markdown()
    assert md.count("\n- ") + 1 == len(glossary.TERMS) and "**TTFT** (time to first token)" in md
