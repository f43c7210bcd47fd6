"""AppTest of pages/labs/lab_profile.py (Where the time goes): it renders, measures with the tiny model, shows no exception."""

from tests.pages.labs.lab_helpers import open_lab_alone
from ui import state


def test_profile_page_profiles():
    at = open_lab_alone("lab_profile")
    assert not at.exception
    at.select_slider(key=state.PROFILE_TOKENS).set_value(32).run()
    at.button(key=state.PROFILE_RUN).click().run()
    assert not at.exception and not at.error
    result = at.session_state[state.STORE].labs[state.PROFILE_RESULT]
    assert result.prefill.by_kind["GEMM (matrix × matrix)"] > 0
    assert len(at.get("plotly_chart")) == 2 and len(at.dataframe) == 3
    assert len(result.run_timings) == 3  # the same request on a Run's path, without the profiler
    assert any("these are the times a Run gets" in m.value for m in at.markdown)
