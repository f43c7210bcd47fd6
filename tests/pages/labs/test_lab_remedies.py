"""AppTest of pages/labs/lab_remedies.py (Remedies lab): it renders, measures with the tiny model, shows no exception."""

from tests.pages.labs.lab_helpers import open_lab_alone
from ui import state


def test_remedies_page_measures_each_remedy():
    at = open_lab_alone("lab_remedies")
    assert not at.exception
    at.number_input(key=state.REMEDY_TOKENS).set_value(6).run()
    for key in ("kv_cache", "speculative", "prefix", "int8", "kernels", "overhead", "dtype"):
        at.button(key=state.REMEDY_MEASURE + key).click().run()
        assert not at.exception, key
        assert not at.error, (key, [e.value for e in at.error])
        assert key in at.session_state[state.STORE].labs[state.REMEDY_RESULTS]
    assert len(at.get("plotly_chart")) >= 8  # one per remedy + the indicator matrix
    assert any("×" in str(md.value) for md in at.markdown)


def test_remedies_tabs_are_short_and_the_verdict_rule_is_stated():
    at = open_lab_alone("lab_remedies")
    assert not at.exception
    labels = [t.label for t in at.tabs]
    assert labels[-1] == "Indicator lights" and sum(len(label) for label in labels) <= 80
    assert any("spread between the runs" in c.value and "○ too few runs" in c.value for c in at.caption)
    assert not any("±15%" in c.value for c in at.caption)  # no fixed noise band


def test_a_second_measurement_adds_its_runs_to_the_lights_spread():
    at = open_lab_alone("lab_remedies")
    at.number_input(key=state.REMEDY_TOKENS).set_value(4).run()
    for _ in range(2):
        at.button(key=state.REMEDY_MEASURE + "kernels").click().run()
        assert not at.exception
    runs = at.session_state[state.STORE].labs[state.REMEDY_HISTORY]["kernels"]
    assert len(runs) == 2 and all(len(r.rows[0].tpot_runs) == 3 for r in runs)  # three runs per measurement
    assert any("median of 6" in str(md.value) for md in at.markdown)
