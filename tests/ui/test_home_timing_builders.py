"""Unit tests for the Home/Timing builders: prompt fitting, diagnosis, timing figures, run tables and CSV."""
import io
import math

import pandas as pd
import pytest

import engine
from engine.core.trace import DecodeStep, Trace
from ui.figures import fig_timing
from ui.figures.theme import DECODE_COLOR, PREFILL_COLOR
from ui.text import diagnosis, prompts, runs


def hand_trace(prefill_s: float, step_s: list[float], n_prompt: int = 16, model: str = "hand") -> Trace:
    """A Trace built by hand: known timings, no model needed."""
    n_out = len(step_s) + 1
    steps = [DecodeStep(s, n_prompt + i + 1, (n_prompt + i + 1) * 100) for i, s in enumerate(step_s)]
    return Trace(model=model, device="cpu", dtype="float32", prompt_ids=list(range(n_prompt)),
                 output_ids=list(range(n_out)), text="x" * n_out, prefill_seconds=prefill_s, steps=steps,
                 env={"torch": "test"}, kv_bytes_per_token=100, settings={"temperature": 0.0, "chat": False})


# ---------------------------------------------------------------- prompt fitting
@pytest.mark.parametrize("n", [1, 7, 64, 200])
def test_fit_trims_to_exact_count(tiny_llama, n):
    text = prompts.example("summarisation").text
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, n)
    full = tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    assert len(fit.ids) == n
    assert fit.ids == full[:n]  # trimmed from the end: the instruction at the start is kept
    assert fit.action == "trimmed"
    assert fit.text == tiny_llama.tokenizer.decode(fit.ids)


def test_fit_repeats_short_text_to_exact_count(tiny_llama):
    text = "Hello bridge."
    own = tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, 100)
    assert len(own) < 100 and len(fit.ids) == 100
    assert fit.ids[: len(own)] == own
    assert fit.action == "repeated" and fit.source_tokens == len(own)
    assert fit.text.count("Hello bridge.") >= 2


def test_fit_as_typed_keeps_the_text(tiny_llama):
    text = "<script>alert(1)</script> 你好 🌉"
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, None)
    assert fit.ids == tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    assert fit.text == text and fit.action == "as typed"
    assert "exactly as typed" in prompts.describe_fit(fit)


@pytest.mark.parametrize("text", ["", "   \n "])
def test_fit_refuses_empty_text(tiny_llama, text):
    with pytest.raises(ValueError, match="empty"):
        prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, 64)


def test_examples_cover_the_four_workloads():
    keys = {ex.key for ex in prompts.examples()}
    assert keys == {"translation", "summarisation", "code", "chat"}
    with pytest.raises(KeyError):
        prompts.example("poetry")


def test_long_examples_fill_1024_real_tokens(smollm_tokenizer):
    counts = {ex.key: len(smollm_tokenizer.encode(ex.text)) for ex in prompts.examples()}
    assert counts["summarisation"] >= 1000
    assert counts["translation"] >= 700
    fit = prompts.fit_prompt_to_tokens(smollm_tokenizer, prompts.example("summarisation").text, 1024)
    assert len(fit.ids) == 1024 and fit.action == "trimmed"


# ---------------------------------------------------------------- diagnosis
def test_diagnosis_prefill_dominated():
    trace = hand_trace(2.0, [0.01] * 3, n_prompt=1000)
    d = diagnosis.diagnose(engine.summarize(trace))
    assert d.dominant == "prefill" and not d.balanced
    assert d.share == pytest.approx(2.0 / 2.03)
    assert [name for name, _ in d.helps] == [name for name, _ in diagnosis.PREFILL_REMEDIES]
    assert d.wasted == diagnosis.WASTED_ON_PREFILL
    md = d.to_markdown()
    assert "Prefill dominates: 99%" in md and "faster decoder" in md
    assert "Chunked prefill" in md.split("Remedies for a shared server")[1]  # the server's list, not this request's


def test_diagnosis_decode_dominated():
    trace = hand_trace(0.02, [0.03] * 49, n_prompt=16)
    d = diagnosis.diagnose(engine.summarize(trace))
    assert d.dominant == "decode" and not d.balanced
    assert d.share == pytest.approx(1.47 / 1.49)
    names = [name for name, _ in d.helps]
    assert "Speculative decoding" in names and not any("atching" in n or "hunked" in n for n in names)
    assert any("horsepower" in why for _, why in d.wasted)
    assert d.max_gain_other == pytest.approx(0.02 / 1.49)
    assert "Decode dominates" in d.headline and "TPOT 30.0 ms" in d.details


def test_diagnosis_balanced_offers_both_sets():
    d = diagnosis.diagnose(engine.summarize(hand_trace(0.5, [0.05] * 10)))
    assert d.balanced
    names = [name for name, _ in d.helps]
    assert "Prefix caching" in names and "Speculative decoding" in names


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
