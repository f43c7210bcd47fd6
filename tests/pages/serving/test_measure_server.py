"""AppTest for "Measure a server" (with our engine served by the test on 127.0.0.1), the operator's allow-list, and
every other page drawing a run measured on a server (no model config, no attention, no KV picture)."""
import pytest
from streamlit.testing.v1 import AppTest

from engine.errors import EngineError
from tests import ROOT, navigation_only
from tests.serving_helpers import InProcessServer, metrics_of
from ui import state
from ui.engine_link import server_measurement

APP = str(ROOT / "app.py")



@pytest.fixture(scope="module")
def target():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


def open_page(monkeypatch, hosts: str | None) -> AppTest:
    navigation_only(monkeypatch)
    if hosts is None:
        monkeypatch.delenv(server_measurement.ENV, raising=False)
    else:
        monkeypatch.setenv(server_measurement.ENV, hosts)
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state[state.MODEL] = "tiny-llama"
    at.run()
    return at.switch_page("pages/serving/measure_server.py").run()


def measure_with(at: AppTest, url: str) -> AppTest:
    at.text_input(key=state.MEASURE_URL).set_value(url)
    at.slider(key=state.MEASURE_PROMPT_TOKENS).set_value(24)
    at.slider(key=state.MEASURE_OUTPUT_TOKENS).set_value(5)
    at.slider(key=state.MEASURE_REQUESTS).set_value(2)
    return at.button(key=state.MEASURE_RUN).click().run()


def test_off_unless_the_operator_allows_hosts(monkeypatch):
    at = open_page(monkeypatch, None)
    assert not at.exception
    assert at.text_input(key=state.MEASURE_URL).disabled
    assert any("off" in i.value and "--measure-hosts" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == state.MEASURE_RUN]


def test_measures_a_server_and_keeps_its_runs_next_to_local_ones(monkeypatch, target):
    at = open_page(monkeypatch, "127.0.0.1")
    at = measure_with(at, target.url)
    assert not at.exception and not at.error
    history = at.session_state[state.STORE].history
    assert [t.source for t in history] == ["server", "server"] and all(t.n_output == 5 for t in history)
    table = at.dataframe[0].value.set_index("metric")
    assert table.loc["TTFT", "client mean (ms)"] > 0 and table.loc["TTFT", "server mean (ms)"] > 0
    assert table.loc["ITL", "server mean (ms)"] > 0

    story = ("pages/story/home.py", "pages/story/timing.py", "pages/story/prefill.py", "pages/story/decode.py")
    for page in (*story, "pages/labs/lab_budget.py"):
        at.switch_page(page).run()
        assert not at.exception, page
    at.switch_page("pages/story/prefill.py").run()
    assert any("measured from outside" in i.value for i in at.info)
    at.switch_page("pages/story/decode.py").run()
    assert any("measured from outside" in i.value for i in at.info)
    at.switch_page("pages/story/timing.py").run()
    runs_table = next(d.value for d in at.dataframe if "source" in d.value.columns)  # Timing's table of every run
    assert list(runs_table["source"]) == ["server", "server"]
    assert any("Measured from outside" in c.value for c in at.caption)


def test_a_host_off_the_list_is_refused_before_any_request(monkeypatch, target):
    port = int(target.url.rsplit(":", 1)[1])
    before = metrics_of(target.url).get("vllm:e2e_request_latency_seconds_count", 0)
    at = measure_with(open_page(monkeypatch, f"127.0.0.1:{port + 1},gpu-box"), target.url)
    assert not at.exception and any("not on this dashboard's list" in e.value for e in at.error)
    assert metrics_of(target.url).get("vllm:e2e_request_latency_seconds_count", 0) == before


@pytest.mark.parametrize("url,ok", [
    ("http://127.0.0.1:8000", True), ("http://127.0.0.1:9999/v1", True), ("http://gpu-box:8000", True),
    ("http://gpu-box:8001", False), ("http://localhost:8000", False), ("http://127.0.0.1:8000@evil.example/", False),
    ("http://evil.example/?http://127.0.0.1:8000", False), ("file:///etc/passwd", False), ("http://[::1]:8000", True),
])
def test_allow_list(url, ok):
    allowed = server_measurement.allowed_hosts({server_measurement.ENV: " 127.0.0.1, GPU-box:8000 ,[::1]:8000"})
    assert allowed == ["127.0.0.1", "gpu-box:8000", "[::1]:8000"]
    if ok:
        assert server_measurement.check_url(url, allowed).startswith("http://")
    else:
        with pytest.raises(EngineError):
            server_measurement.check_url(url, allowed)
    with pytest.raises(EngineError, match="off"):
        server_measurement.check_url(url, [])
