"""The Timing page's figures from hand-made traces (ui/figures/fig_timing.py)."""
import pytest

import engine
from tests.ui.hand_traces import hand_trace
from ui.figures import fig_timing
from ui.figures.theme import DECODE_COLOR, PREFILL_COLOR
from ui.text import run_numbers, runs


# ---------------------------------------------------------------- figures
def test_phase_split_figure_uses_phase_colours():
    s = engine.summarize(hand_trace(0.1, [0.02] * 10))
    fig = fig_timing.phase_split_figure(s)
    assert [t.marker.color for t in fig.data] == [PREFILL_COLOR, DECODE_COLOR]
    assert fig.data[0].x[0] == pytest.approx(100.0) and fig.data[1].x[0] == pytest.approx(200.0)
    assert fig.layout.barmode == "stack" and fig.layout.xaxis.title.text == "time (ms)"
    assert "prefill 100 ms (33%)" in fig.layout.title.text and "decode 200 ms (67%)" in fig.layout.title.text


def test_itl_figure_marks_ttft_at_step_zero():
    fig = fig_timing.itl_figure(0.05, [0.02, 0.03, 0.025])
    ttft, itl, p50 = fig.data
    assert ttft.marker.color == PREFILL_COLOR and list(ttft.x) == [0] and ttft.y[0] == pytest.approx(50.0)
    assert itl.marker.color == DECODE_COLOR and list(itl.x) == [1, 2, 3]
    assert list(itl.y) == pytest.approx([20.0, 30.0, 25.0])
    assert list(p50.y) == pytest.approx([25.0, 25.0]) and p50.name == "ITL p50 25.0 ms"
    assert fig.layout.yaxis.title.text == "latency (ms)" and "output token" in fig.layout.xaxis.title.text
    assert fig.layout.yaxis.range is None  # not clipped: TTFT is comparable to the steps
    assert fig.layout.annotations[0].text == "TTFT 50 ms"


def test_itl_figure_clips_a_huge_ttft_and_says_so():
    fig = fig_timing.itl_figure(2.0, [0.02] * 5)
    label = fig.layout.annotations[0].text
    assert "off scale" in label and "2,000 ms" in label
    assert fig.layout.yaxis.range[1] == pytest.approx(20.0 * 1.8)


def test_cumulative_figure_ends_at_total_time():
    trace = hand_trace(0.1, [0.02, 0.04])
    fig = fig_timing.cumulative_figure(trace)
    prefill, decode = fig.data
    assert prefill.line.color == PREFILL_COLOR and decode.line.color == DECODE_COLOR
    assert list(prefill.y) == pytest.approx([0.0, 100.0])
    assert list(decode.x) == [1, 2, 3] and list(decode.y) == pytest.approx([100.0, 120.0, 160.0])
    assert fig.layout.yaxis.title.text == "elapsed since request (ms)"


def test_runs_figure_stacks_each_run():
    table = runs.runs_table([hand_trace(0.1, [0.02] * 3), hand_trace(0.3, [0.02] * 7, n_prompt=64)])
    fig = fig_timing.runs_figure(table)
    assert [t.marker.color for t in fig.data] == [PREFILL_COLOR, DECODE_COLOR]
    assert list(fig.data[0].y) == pytest.approx([100.0, 300.0]) and list(fig.data[1].y) == pytest.approx([60.0, 140.0])
    assert fig.data[0].x[1].startswith("#2 · 64→8")


def test_a_run_not_measured_here_says_so_under_each_charts_title():
    """A chart saved as a PNG leaves the page's provenance line behind, so its subtitle carries it."""
    trace = hand_trace(0.1, [0.02] * 4)
    trace.settings["recording"] = {"machine": "AMD EPYC 2 vCPU", "date": "2026-11-30"}  # read from a file
    where = run_numbers.chart_note(trace)
    assert where == "a recording (AMD EPYC 2 vCPU, 2026-11-30)"
    for fig in (fig_timing.phase_split_figure(engine.summarize(trace), where=where),
                fig_timing.itl_figure(0.1, [0.02] * 4, where=where), fig_timing.cumulative_figure(trace, where=where)):
        assert fig.layout.title.subtitle.text == where and where not in fig.layout.title.text
    trace.settings["model_spec"] = ["hand", "cpu", "float32", "plain"]  # what the run panel adds to a run it measured
    assert run_numbers.chart_note(trace) == ""
    assert fig_timing.cumulative_figure(trace).layout.title.subtitle.text is None
    trace.source = "server"
    assert run_numbers.chart_note(trace) == "measured over HTTP"
