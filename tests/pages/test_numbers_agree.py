"""One run, every page that shows a FLOP count, a byte count or a parameter count: they must all agree with each
other and with engine.perfmodel (the one place those numbers are computed)."""
import re

import pytest
import torch
from streamlit.testing.v1 import AppTest

import engine
from engine.perfmodel.flops import prefill_flops
from tests import ROOT
from ui import state
from ui.engine_link.run_store import RunStore
from ui.text.phase_numbers import binary_bytes, si

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def trace(tiny_llama):
    trace = engine.generate(tiny_llama, list(range(1, 41)), 8, capture_attention=True, ignore_eos=True)
    trace.settings["model_spec"] = ["tiny-llama", "auto", "float32"]
    return trace


def page_with(trace, page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[state.STORE] = RunStore(last_trace=trace)
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label_part: str) -> str:
    return next(m.value for m in at.metric if label_part in m.label)


def test_flops_bytes_and_parameters_agree_across_pages(trace, tiny_llama, navigation_only):
    cfg = tiny_llama.config
    flops = prefill_flops(cfg, trace.n_prompt)
    achieved = flops.total / trace.prefill_seconds

    prefill = page_with(trace, "pages/story/prefill.py")
    assert metric(prefill, "Prefill work") == si(flops.total, "FLOP")
    assert metric(prefill, "Achieved") == si(achieved, "FLOP/s")
    caption = " ".join(c.value for c in prefill.caption)
    assert f"W = {cfg.matmul_params:,}" in caption  # the formula's inputs, from the trace's own config

    roofline = page_with(trace, "pages/labs/lab_roofline.py")
    points = roofline.dataframe[0].value.set_index("phase")
    assert points.loc["prefill", "achieved GFLOP/s"] == pytest.approx(achieved / 1e9, abs=0.01)

    decode = page_with(trace, "pages/story/decode.py")
    assert metric(decode, "KV bytes per token") == f"{cfg.kv_bytes_per_token(4):,} B" == f"{trace.kv_bytes_per_token:,} B"
    assert metric(decode, "KV cache bytes") == binary_bytes(trace.n_prompt * cfg.kv_bytes_per_token(4))

    sidebar = " ".join(c.value for c in decode.sidebar.caption)
    shown = re.search(r"([\d,.]+) ([KM]) parameters", sidebar)
    assert shown and float(shown.group(1).replace(",", "")) * {"K": 1e3, "M": 1e6}[shown.group(2)] == pytest.approx(
        cfg.n_params, rel=0.01)
    assert cfg.n_params * 4 == tiny_llama.weight_bytes == trace.weight_bytes  # the count is exact, not an estimate

    batch = page_with(trace, "pages/labs/lab_batch.py")
    memory = next(c.value for c in batch.caption if "Memory estimate" in c.value)
    assert f"weights {cfg.n_params * 4 / 2**30:.2f} GiB" in memory


def test_choosing_a_missing_gpu_names_the_device(navigation_only):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.sidebar.selectbox(key=state.DEVICE).set_value("cuda").run()
    assert not at.exception
    shown = " ".join(e.value for e in at.sidebar.error)
    assert "device 'cuda'" in shown and "no CUDA GPU" in shown and "pick device auto or cpu" in shown
    at.sidebar.button(key=state.RUN).click().run()
    assert "could not be loaded on device 'cuda'" in " ".join(e.value for e in at.error)


def test_decode_autoplay_stops_at_the_last_token(trace, navigation_only):
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[state.STORE] = RunStore(last_trace=trace)
    at.switch_page("pages/story/decode.py")
    at.session_state[state.DECODE_POSITION] = len(trace.steps) - 1  # one token before the end
    at.run()
    at.session_state[state.DECODE_LAST_TICK] = 0.0  # long ago: the first autoplay tick advances at once
    at.toggle(key=state.DECODE_AUTOPLAY).set_value(True).run()
    assert not at.exception
    assert at.session_state[state.DECODE_POSITION] == len(trace.steps)  # reached the last token...
    assert at.toggle(key=state.DECODE_AUTOPLAY).value is False  # ...and autoplay switched itself off
