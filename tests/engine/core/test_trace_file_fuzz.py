"""A recorded run's file changed anywhere (hypothesis): read_trace returns a trace the dashboard can summarise, or
refuses the file in one line (TraceFileError); never another exception. The examples are derandomised for CI."""
import json
import math

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import engine
from engine.core import trace_file
from engine.core.metrics import format_summary, summarize
from engine.core.trace_file import TraceFileError, read_trace
from tests.trace_mutations import mutation


@pytest.fixture(scope="module")
def good(tiny_llama) -> dict:
    trace = engine.generate(tiny_llama, "The valley and the bridge", 5, capture_attention=True, ignore_eos=True)
    return json.loads(trace_file.trace_bytes(trace, "a test run"))


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_file_changed_anywhere_is_read_and_summarised_or_refused_in_one_line(good, data):
    raw = mutation(data, good)
    try:
        trace = read_trace(raw, "run.json")
    except TraceFileError as exc:
        event("refused")
        message = str(exc)
        assert "\n" not in message and message.startswith("run.json ") and len(message) < 400, message
        return
    event("read")
    summary = summarize(trace)  # what every page shows of a replayed run
    assert math.isfinite(summary.ttft_s) and summary.ttft_s >= 0
    assert format_summary(summary) and trace_file.describe(trace) is not None
    trace.to_json(ensure_ascii=False).encode("utf-8")  # every string in it is text a page can draw (no lone surrogate)
    assert read_trace(trace_file.trace_bytes(trace), "run.json").output_ids == trace.output_ids  # saves again
