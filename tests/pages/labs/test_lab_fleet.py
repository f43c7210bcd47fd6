"""AppTest of pages/labs/lab_fleet.py (the fleet planner): plans, says what is measured, flags the simulator's misses."""
import json

import pytest

from tests.pages.labs.lab_helpers import no_exception, open_lab, open_lab_alone
from ui import state
from ui.text import fleet_text


@pytest.fixture
def calibration(tmp_path, monkeypatch):
    """A recorded calibration whose check has one metric 50 % off (the page must say so)."""
    path = tmp_path / "fleet_check.json"
    path.write_text(json.dumps({
        "fit": {"fixed_s": 0.03, "per_token_s": 2e-4, "per_kv_byte_s": 1e-10, "kv_bytes_per_token": 46080.0,
                "source": "measured on this machine: fitted from 3 steps"},
        "efficiency": {"compute": 0.3, "bandwidth": 0.4, "weights_bandwidth": 0.5},
        "residuals": [["prefill", 64, 0.05, 0.045], ["decode", 1, 0.03, 0.031], ["decode", 4, 0.032, 0.031]],
        "rows": [["chat", "TTFT p50", 0.10, 0.11], ["chat", "TPOT p50", 0.040, 0.060]],
        "note": "smollm2-135m, recorded on this machine"}))
    monkeypatch.setattr(fleet_text, "CALIBRATION", path)
    return path


def test_page_plans_the_cheapest_fleet_and_splits_the_bill(calibration):
    at = open_lab_alone("lab_fleet")
    no_exception(at)
    assert any("**Measured** (this machine)" in i.value and "**Extrapolated**" in i.value for i in at.info)
    assert any("outside 20 %" in w.value and "TPOT p50" in w.value and "+50%" in w.value for w in at.warning)
    assert not any("TTFT p50" in w.value for w in at.warning)  # 10 % off: within the bar
    at.number_input(key=state.FLEET_REQUESTS).set_value(200)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    text = " ".join(m.value for m in at.markdown)
    assert "Cheapest fleet meeting the SLOs" in text and "The bill by stage" in text
    assert any("estimate:" in c.value for c in at.caption)  # the card's step model is labelled as one


def test_without_a_calibration_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet_text, "CALIBRATION", tmp_path / "absent.json")
    at = open_lab_alone("lab_fleet")
    no_exception(at)
    assert any("no calibration recorded" in c.value for c in at.caption)


def test_bad_objective_is_one_clear_line(calibration):
    at = open_lab_alone("lab_fleet")
    at.number_input(key=state.FLEET_TTFT).set_value(0.0)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    assert [e.value for e in at.error] == ["the TTFT objective must be a number of seconds > 0, not 0.0"]


def test_page_opens_inside_the_app():
    at = open_lab("lab_fleet")
    no_exception(at)
    assert any("fleet planner" in t.value for t in at.title)


def test_custom_workload_of_long_prompts_puts_the_bill_on_the_valley(calibration):
    at = open_lab_alone("lab_fleet")
    at.selectbox(key=state.FLEET_WORKLOAD).set_value("custom").run()
    at.number_input(key=state.FLEET_PROMPT).set_value(2048)
    at.number_input(key=state.FLEET_OUTPUT).set_value(0)
    at.number_input(key=state.FLEET_REQUESTS).set_value(200)
    at.button(key=state.FLEET_PLAN).click().run()
    no_exception(at)
    assert any("the valley (prefill) takes **100%**" in m.value for m in at.markdown)
