"""A recorded run that passed read_trace is drawn: every timing, attention and KV-cache figure a replayed run shows
builds for a trace file changed anywhere (hypothesis, derandomised), and for one that leaves the token pieces out."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.core import trace_file
from engine.core.metrics import summarize
from engine.core.trace_file import TraceFileError, read_trace
from tests.trace_mutations import mutation
from ui.figures import fig_attention, fig_kvcache, fig_timing


@pytest.fixture(scope="module")
def good(tiny_llama) -> dict:
    trace = engine.generate(tiny_llama, "The valley and the bridge", 5, capture_attention=True, ignore_eos=True)
    return json.loads(trace_file.trace_bytes(trace, "a test run"))


def _draw_everything(trace) -> list:
    """The figures the replay pages build (Home, Prefill, Decode, Timing), first and last positions."""
    summary, last = summarize(trace), len(trace.steps)
    figures = [fig_timing.phase_split_figure(summary), fig_timing.itl_figure(summary.ttft_s, [s.seconds for s in trace.steps]),
               fig_timing.cumulative_figure(trace)]
    if trace.attention is not None:
        for head in (None, 0):
            figures += [fig_attention.attention_heatmap(trace, 0, head), fig_attention.phase_step_figure(trace, 0, head, 0),
                        fig_attention.phase_step_figure(trace, 0, head, last),
                        fig_attention.attention_row_figure(trace, last, 0, head)]
    if trace.kv_key_norms is not None:
        figures += [fig_kvcache.kv_cache_figure(trace, 0), fig_kvcache.kv_cache_figure(trace, last)]
    return figures


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_trace_that_reads_is_drawn(good, data):
    try:
        trace = read_trace(mutation(data, good), "run.json")
    except TraceFileError:
        return
    assert _draw_everything(trace)


def test_a_trace_without_token_pieces_labels_tokens_by_position(good):
    """Found by the test above: a file without "prompt_tokens" failed the attention picture (labels vs rows)."""
    trace = read_trace(json.dumps({k: v for k, v in good.items() if k not in ("prompt_tokens", "output_tokens")}).encode())
    figures = _draw_everything(trace)
    heatmap = figures[3]  # the first attention heatmap: its hover names each query and key
    assert heatmap.data[0].customdata[0][0][0] == "0: #0"
