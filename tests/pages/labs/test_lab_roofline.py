"""AppTest of pages/labs/lab_roofline.py (Roofline & hardware): it renders, measures with the tiny model, shows no exception."""

from tests.pages.labs.lab_helpers import no_exception, open_lab
from ui import state


def test_roofline_page_measures_and_predicts():
    at = open_lab("lab_roofline")
    no_exception(at)
    assert [m.label for m in at.metric][:3] == ["Copy bandwidth (measured)", "Matmul FLOP/s (measured)", "Ridge point"]
    points = at.dataframe[0].value
    assert list(points["phase"]) == ["prefill", "decode"]
    before = at.dataframe[1].value["TTFT (ms, est.)"].tolist()
    at.selectbox(key=state.ROOF_MODEL).set_value("Llama-2 7B (MHA, 32 KV heads)").run()
    no_exception(at)
    after = at.dataframe[1].value["TTFT (ms, est.)"].tolist()
    assert all(a > b for a, b in zip(after, before))  # a 7B model takes longer than SmolLM2 everywhere
    at.selectbox(key=state.ROOF_WORKLOAD).set_value("Code generation / writing").run()
    no_exception(at)
    assert "decode" in at.dataframe[2].value["dominant phase"].iloc[-1]
