"""AppTest of pages/labs/lab_roofline.py: it measures this machine with the tiny model (peaks, MFU, MBU, crossovers),
shows the card model on every card (this machine's measured card first), the cost by stage, the KV wall, H100 -> H200."""

import dataclasses

import pytest

from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state


def test_roofline_page_measures_here_and_estimates_every_card():
    at = open_lab("lab_roofline")
    no_exception(at)
    labels = [m.label for m in at.metric]
    assert labels[:3] == ["Copy bandwidth (measured, read + write)", "Matmul FLOP/s (measured)", "Ridge point (matmul ÷ copy)"]
    assert "MFU (measured here)" in labels and "MBU (measured here)" in labels
    points = at.dataframe[0].value
    assert list(points["phase"]) == ["prefill", "decode"]
    cards = at.dataframe[1].value
    assert cards["card"].iloc[0].startswith("this machine") and cards["from"].iloc[0].startswith("measured here at")
    assert (cards["from"].iloc[1:].isin(["spec sheet", "spec sheet (bandwidth); TFLOP/s an estimate",
                                         "estimate: a typical laptop"])).all()
    text = " ".join(m.value for m in at.markdown)
    assert "On this machine (peaks measured at" in text and "only the bridge gets faster" in text
    before = cards.set_index("card")["TTFT (ms, est.)"]
    at.selectbox(key=state.ROOF_MODEL).set_value("SmolLM2-135M").run()
    no_exception(at)
    after = at.dataframe[1].value.set_index("card")["TTFT (ms, est.)"]
    assert all(after[c] < before[c] for c in before.index if c in after.index and before[c] == before[c])


def test_the_cost_by_stage_follows_the_card_and_the_workload():
    at = open_lab("lab_roofline")
    at.selectbox(key=state.ROOF_COST_CARD).set_value("NVIDIA H100 SXM").run()
    no_exception(at)
    words = [m.value for m in at.markdown if m.value.startswith("On NVIDIA H100 SXM")]
    assert words and "at B = 1 " in words[0] and "Batching shares each decode step" in words[0]
    at.selectbox(key=state.ROOF_WORKLOAD).set_value("Code generation / writing").run()
    no_exception(at)
    shares = at.dataframe[3].value
    assert shares["prefill's share of the cost, B = 1 (est.)"].iloc[-1] < shares[
        "prefill's share of the cost, B = 64 (est.)"].iloc[-1]


def test_the_peaks_wait_for_quiet_cores_and_measure_again_on_request(monkeypatch):
    """The peaks are measured as the page opens, while the browser draws it: their probe is sent once the cores are
    quiet (ui/engine_link/job_progress.py); "Measure again" measures the peaks again too, not only the run."""
    from ui.engine_link import job_progress

    asked = []
    monkeypatch.setattr(job_progress, "wait_for_quiet", lambda first, most: asked.append((first, most)) or (first, True))
    at = open_lab("lab_roofline")
    no_exception(at)
    assert asked[0] == (job_progress.QUIET_FIRST_S, job_progress.QUIET_MOST_S)  # the peaks' probe waited
    first = at.session_state[state.STORE].labs[state.PEAKS][("cpu", "float32")]
    started = len(asked)
    at.button(key=state.ROOF_MEASURE_RUN).click().run()
    no_exception(at)
    assert len(asked) == started + 2  # the peaks and the small run, each sent once the cores were quiet
    again = at.session_state[state.STORE].labs[state.PEAKS][("cpu", "float32")]
    assert again is not first and again.measured_at


def test_a_recording_is_never_set_against_this_machines_peaks():
    """A run read from a file (another session's, maybe another machine's) is not measured here: the page plots its
    own small measurement instead, and this machine's card keeps the run it measured."""
    at = open_lab("lab_roofline")
    no_exception(at)
    store = at.session_state[state.STORE]
    own = store.labs[state.ROOF_TRACE]
    recording = dataclasses.replace(own, prefill_seconds=own.prefill_seconds * 50,
                                    settings={**own.settings, "recording": {"machine": "elsewhere"}})
    recording.settings.pop("model_spec", None)  # what a recording opened from a file carries: no model to ask
    store.keep(recording, recorded="elsewhere")
    at.run()
    no_exception(at)
    assert any(c.value.startswith("Points from a small measurement made on this page") for c in at.caption)
    prefill = at.dataframe[0].value.set_index("phase").loc["prefill"]
    assert prefill["time (ms)"] == pytest.approx(own.prefill_seconds * 1e3, rel=0.01)  # not the recording's 50x
