"""A session's runs as tables and CSV, and the run-to-run spread of repeated requests (ui/text/runs.py)."""
import io
import math

import pandas as pd
import pytest

import engine
from tests.ui.hand_traces import hand_trace
from ui.text import runs


# ---------------------------------------------------------------- tables and CSV
def test_runs_table_and_csv_round_trip():
    traces = [hand_trace(0.1, [0.02] * 3), hand_trace(0.2, [0.01] * 9, model="other")]
    table = runs.runs_table(traces)
    assert list(table["run"]) == [1, 2] and list(table["model"]) == ["hand", "other"]
    assert list(table["output tokens"]) == [4, 10]
    assert table.loc[0, "TTFT (ms)"] == pytest.approx(100.0) and table.loc[1, "TPOT (ms)"] == pytest.approx(10.0)
    back = pd.read_csv(io.StringIO(runs.to_csv(table)))
    assert list(back.columns) == list(table.columns)
    assert back.loc[1, "total (ms)"] == pytest.approx(290.0)


def test_steps_table_has_ttft_then_each_step():
    trace = hand_trace(0.1, [0.02, 0.03], n_prompt=5)
    steps = runs.steps_table(trace)
    assert list(steps["phase"]) == ["prefill", "decode", "decode"]
    assert list(steps["latency (ms)"]) == pytest.approx([100.0, 20.0, 30.0])
    assert list(steps["KV length"]) == [5, 6, 7] and steps.loc[0, "KV bytes"] == 500
    assert "token,phase,latency (ms)" in runs.to_csv(steps).splitlines()[0]


def test_metrics_table_with_a_single_token_shows_nan_tpot():
    s = engine.summarize(hand_trace(0.1, []))
    table = runs.metrics_table(s)
    assert math.isnan(table.set_index("metric").loc["TPOT", "value"])
    assert table.set_index("metric").loc["TTFT", "value"] == pytest.approx(100.0)


# ---------------------------------------------------------------- run-to-run spread
def test_spread_of_repeated_requests_median_and_range():
    """The issue's three runs of one 64 -> 32 request: TTFT 183-240 ms; a different request is not grouped."""
    history = [hand_trace(t, [p] * 31, n_prompt=64) for t, p in ((0.183, 0.063), (0.240, 0.079), (0.205, 0.066))]
    history.append(hand_trace(0.5, [0.06] * 3, n_prompt=128))
    spread = runs.spread_table(runs.runs_table(history))
    assert len(spread) == 1
    row = spread.iloc[0]
    assert row["runs"] == 3 and row["prompt tokens"] == 64 and row["output tokens"] == 32
    assert row["TTFT median (ms)"] == pytest.approx(205) and row["TTFT min (ms)"] == pytest.approx(183)
    assert row["TTFT max (ms)"] == pytest.approx(240) and row["TPOT median (ms)"] == pytest.approx(66)
    note = runs.spread_note(spread)
    assert "The same 64 → 32 request, 3 runs: TTFT median 205.0 ms (range 183.0–240.0, 31% apart)" in note
    assert "noise" in note


def test_spread_without_repeats_invites_a_rerun():
    spread = runs.spread_table(runs.runs_table([hand_trace(0.1, [0.02] * 3)]))
    assert spread.empty and "Run the same request again" in runs.spread_note(spread)


def test_a_recording_is_its_own_source_and_never_pooled_with_runs_measured_here():
    """A run read from a file may come from another machine: the table says so, and the spread of one request never
    mixes it with this session's runs of the same request."""
    here = [hand_trace(t, [0.06] * 31, n_prompt=64) for t in (0.18, 0.20)]
    for t in here:
        t.settings["model_spec"] = ["hand", "cpu", "float32", "plain"]  # what the run panel adds to a run it measured
    recorded = hand_trace(0.9, [0.2] * 31, n_prompt=64)  # no model_spec: read from a file
    table = runs.runs_table([*here, recorded])
    assert list(table["source"]) == ["local", "local", "recording"]
    spread = runs.spread_table(table)
    assert len(spread) == 1 and spread.iloc[0]["runs"] == 2 and spread.iloc[0]["TTFT max (ms)"] == pytest.approx(200)
