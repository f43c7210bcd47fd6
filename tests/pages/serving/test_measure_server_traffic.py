"""Measure a server replays the Traffic lab's latest workload: the same arrivals, judged against the lab's SLOs."""
from engine.perfmodel.workload import arrivals, shaped
from tests.pages.serving.test_measure_server import open_page, target  # noqa: F401 (a fixture)
from ui import state


def test_replays_the_traffic_labs_workload_with_the_same_arrivals(monkeypatch, target):  # noqa: F811
    at = open_page(monkeypatch, "127.0.0.1")
    assert not [c for c in at.checkbox if c.key == state.TRAFFIC_REPLAY]  # nothing to replay yet
    workload = shaped("code", request_rate=20.0, prompt_tokens=12, prompt_spread=0.4, output_tokens=4,
                      output_spread=0.3, num_requests=3)
    at.session_state[state.STORE].labs[state.TRAFFIC_WORKLOAD] = (workload, 5)  # what the lab's Run keeps
    at.run()
    at.text_input(key=state.MEASURE_URL).set_value(target.url)
    at.checkbox(key=state.TRAFFIC_REPLAY).check()
    at.button(key=state.MEASURE_RUN).click().run()
    assert not at.exception, [e.value for e in at.exception]
    records = at.session_state[state.STORE].labs[state.MEASURE_RESULT]
    plan = arrivals(workload, 5)
    assert sorted((r["arrived_s"], r["prompt_tokens"], r["output_tokens"]) for r in records) == \
           [(a.at_s, a.prompt_tokens, a.output_tokens) for a in plan]
    table = next(d.value for d in at.dataframe if "goodput (req/s)" in d.value.columns)
    assert int(table["requests"][0]) == 3
