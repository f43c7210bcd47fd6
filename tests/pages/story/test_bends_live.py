"""The Prefill and Decode pages show the two bends' physics for a run measured here: MFU and MBU against this
session's measured peaks, where each bend turns compute-bound (this machine first, then each card), the decode step
measured against the context, and the most sequences each card holds (tiny model; peaks injected, so no copy runs)."""
import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

import engine
from engine.labs.hardware import MeasuredPeaks
from tests import ROOT
from ui import state
from ui.engine_link.run_store import RunStore

APP = str(ROOT / "app.py")
PEAKS = MeasuredPeaks(copy_bytes_per_s=2e10, matmul_flops_per_s=6e10, device="cpu", dtype="float32",
                      read_bytes_per_s=1.5e10, memory_bytes=8e9, measured_at="10:00:00")


@pytest.fixture(scope="module")
def here(tiny_llama):
    """A run as the dashboard's run panel keeps it: measured here, its model named."""
    trace = engine.generate(tiny_llama, "The valley and the bridge", 6, capture_attention=True, ignore_eos=True)
    trace.settings["model_spec"] = ["tiny-llama", "cpu", "float32", "fast"]
    return trace


def open_page(page: str, trace, peaks=True) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    store = RunStore(last_trace=trace)
    if peaks:
        store.labs[state.PEAKS] = {("cpu", "float32"): PEAKS}
    at.session_state[state.STORE] = store
    return at.run()


def test_prefill_page_shows_mfu_and_the_crossovers(here):
    at = open_page("pages/story/prefill.py", here)
    assert not at.exception
    assert any(m.label == "MFU of this prefill (measured here)" for m in at.metric)
    table = at.dataframe[0].value
    assert table["card"][0].startswith("this machine") and "measured here" in table["from"][0]
    assert table["valley compute-bound from (tokens)"].notna().all()
    assert any("Sweep lab" in m.value for m in at.markdown)  # not measured yet: where to measure it


def test_decode_page_shows_mbu_and_measures_steps_against_the_context(here):
    at = open_page("pages/story/decode.py", here)
    assert not at.exception
    assert any(m.label == "MBU of this run's median decode step (measured here)" for m in at.metric)
    assert any("Batch lab" in m.value for m in at.markdown)
    at.button(key=state.CONTEXT_MEASURE).click().run()
    assert not at.exception
    sweep = at.session_state[state.STORE].labs[state.CONTEXT_RESULT]
    assert [p.context for p in sweep.points][-1] > 64 and all(p.step.n == 3 for p in sweep.points)
    assert any("a decode step took" in m.value and "stand-in numbers" in m.value for m in at.markdown)
    wall = at.dataframe[-1].value
    assert (wall["most sequences"] >= wall["with one KV head per query head"]).all()
    assert any("grouped-query attention" in c.value for c in at.caption)


def test_recordings_and_missing_peaks_get_no_live_numbers(here):
    recorded = dataclasses.replace(here, settings={k: v for k, v in here.settings.items() if k != "model_spec"})
    at = open_page("pages/story/prefill.py", recorded)
    assert not at.exception and not any("MFU" in m.label for m in at.metric)
    at = open_page("pages/story/prefill.py", here, peaks=False)
    assert not at.exception and not any("MFU" in m.label for m in at.metric)
    assert any("measured once per session" in c.value for c in at.caption)
    assert at.button(key=state.STORY_PEAKS_MEASURE)
