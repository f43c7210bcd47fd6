"""AppTest: the Remedies lab and "Where the time goes" render, measure with the tiny model, and show no exception."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.controls import state

ROOT = Path(__file__).resolve().parent.parent


def _page(path: str) -> AppTest:
    """The page on its own (no sidebar), with the sidebar's model choice pre-filled."""
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    at.session_state[state.MODEL] = "tiny-llama"
    at.session_state[state.DEVICE] = "cpu"
    at.session_state[state.DTYPE] = "float32"
    return at.run()


def test_remedies_page_measures_each_remedy():
    at = _page("pages/labs/lab_remedies.py")
    assert not at.exception
    at.number_input(key=state.REMEDY_TOKENS).set_value(6).run()
    for key in ("kv_cache", "speculative", "prefix", "int8", "kernels", "overhead", "dtype"):
        at.button(key=state.REMEDY_MEASURE + key).click().run()
        assert not at.exception, key
        assert not at.error, (key, [e.value for e in at.error])
        assert key in at.session_state[state.STORE].labs[state.REMEDY_RESULTS]
    assert len(at.get("plotly_chart")) >= 8  # one per remedy + the indicator matrix
    assert any("×" in str(md.value) for md in at.markdown)


def test_profile_page_profiles():
    at = _page("pages/labs/lab_profile.py")
    assert not at.exception
    at.select_slider(key=state.PROFILE_TOKENS).set_value(32).run()
    at.button(key=state.PROFILE_RUN).click().run()
    assert not at.exception and not at.error
    result = at.session_state[state.STORE].labs[state.PROFILE_RESULT]
    assert result.prefill.by_kind["GEMM (matrix × matrix)"] > 0
    assert len(at.get("plotly_chart")) == 2 and len(at.dataframe) == 3
