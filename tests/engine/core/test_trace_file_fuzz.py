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

# text with lone surrogates too: JSON may escape them ("\\ud800") though they are not Unicode text
odd_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=6) | st.sampled_from(["\ud800", "a\udfffb"])
scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12) | odd_text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
# near a field's own value: the same type at an edge, a neighbour of a count, an empty container
edges = st.sampled_from([0, -1, 1, 2**31, 2**63, -0.0, 1e-300, 1e300, math.nan, math.inf, "", "0", [], {}, None,
                         True, "<script>", "\x1b[31m", "é" * 200])


@pytest.fixture(scope="module")
def good(tiny_llama) -> dict:
    trace = engine.generate(tiny_llama, "The valley and the bridge", 5, capture_attention=True, ignore_eos=True)
    return json.loads(trace_file.trace_bytes(trace, "a test run"))


def _paths(value, path=()):
    """Every place in a JSON value: (key, key, index, ...) tuples."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value[:4]):  # the first few items of a list stand for the rest
            yield from _paths(item, path + (i,))


def _changed(document, path, new, delete: bool):
    if not path:
        return new
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_file_changed_anywhere_is_read_and_summarised_or_refused_in_one_line(good, data):
    paths = list(_paths(good))
    path = data.draw(st.sampled_from(paths), label="path")
    delete = bool(path) and data.draw(st.integers(0, 4), label="delete") == 0
    new = None if delete else data.draw(edges | json_values, label="new value")
    raw = json.dumps(_changed(good, path, new, delete), allow_nan=True).encode()
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
