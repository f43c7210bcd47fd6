"""Old Qin's reading of the ledger: one verdict (with a close-to-even band) in headline and body, tokens counted
as the Decode page counts them (the first came from prefill), from hand-made and recorded traces."""
import re

import pytest

import engine
from engine.core.trace import Trace
from tests import ROOT
from tests.ui.hand_traces import hand_trace
from ui.text import diagnosis


def recorded(name: str) -> Trace:
    return Trace.from_json((ROOT / "assets" / "traces" / f"{name}.json").read_text(encoding="utf-8"))


def test_close_to_even_is_one_verdict_in_headline_and_body():
    """The issue's 512 -> 16 run: TTFT 857 ms, 15 steps of 64.5 ms, 47 % prefill."""
    d = diagnosis.diagnose(engine.summarize(hand_trace(0.857, [0.0645] * 15, n_prompt=512)))
    assert d.verdict == "even" and d.balanced
    assert d.headline.startswith("Close to even: prefill 47%, decode 53%")
    text = d.to_markdown()
    assert "dominates" not in text and "took only" not in text
    assert "Both sets of remedies pay off" in d.details


@pytest.mark.parametrize("share, verdict", [(0.39, "decode"), (0.40, "even"), (0.5, "even"), (0.60, "even"),
                                            (0.61, "prefill"), (float("nan"), "decode")])
def test_verdict_band(share, verdict):
    assert diagnosis.verdict_of(share) == verdict


def test_decode_counts_steps_not_output_tokens():
    """32 output tokens: prefill made the first, decode the other 31 (as the Decode page says)."""
    d = diagnosis.diagnose(engine.summarize(hand_trace(0.240, [0.064] * 31, n_prompt=64)))
    assert d.verdict == "decode"
    assert "made the first token" in d.details
    assert "Decode made the other 31 tokens one at a time, 31 steps in 1,984 ms" in d.details
    assert "32 tokens" not in d.details


@pytest.mark.parametrize("name, verdict", [("long-prompt-short-answer", "prefill"),
                                           ("short-prompt-long-answer", "decode")])
def test_recorded_runs_are_counted_like_the_decode_page(name, verdict):
    trace = recorded(name)
    d = diagnosis.diagnose(engine.summarize(trace))
    assert d.verdict == verdict
    steps = len(trace.steps)
    assert steps == trace.n_output - 1
    assert re.search(rf"Decode made the other {steps} tokens one at a time, {steps} steps", d.details)
    assert f"{trace.n_output} tokens" not in d.details


def test_single_token_has_no_decode_step():
    d = diagnosis.diagnose(engine.summarize(hand_trace(0.1, [])))
    assert d.verdict == "prefill" and "no decode step" in d.details


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
