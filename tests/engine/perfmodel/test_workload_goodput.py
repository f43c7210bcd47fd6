"""Workloads give one fixed arrival list per seed; goodput counts only requests within both objectives."""
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EngineError
from engine.perfmodel.goodput import SLO, Outcome, goodput, percentile, throughput
from engine.perfmodel.workload import PRESETS, Lengths, Workload, arrivals, preset, shaped


def test_same_seed_same_arrivals_and_poisson_mean_gap():
    w = Workload(Lengths(64), Lengths(16), request_rate=4.0, num_requests=2000)
    a, b = arrivals(w, seed=3), arrivals(w, seed=3)
    assert a == b and arrivals(w, seed=4) != a
    gaps = [y.at_s - x.at_s for x, y in zip(a, a[1:])]
    assert statistics.mean(gaps) == pytest.approx(0.25, rel=0.08)
    assert statistics.stdev(gaps) == pytest.approx(0.25, rel=0.12)  # exponential: sd = mean


def test_burstiness_changes_spread_not_mean_and_infinite_rate_is_a_burst():
    steady = arrivals(Workload(Lengths(8), Lengths(8), request_rate=2.0, burstiness=8.0, num_requests=2000))
    gaps = [y.at_s - x.at_s for x, y in zip(steady, steady[1:])]
    assert statistics.mean(gaps) == pytest.approx(0.5, rel=0.05) and statistics.stdev(gaps) < 0.25
    burst = arrivals(Workload(Lengths(8), Lengths(8), request_rate=math.inf, num_requests=5))
    assert [a.at_s for a in burst] == [0.0] * 5


def test_lengths_stay_in_bounds_and_presets_tell_the_fable():
    for a in arrivals(preset("chat", num_requests=500)):
        assert 8 <= a.prompt_tokens <= 1024 and 1 <= a.output_tokens <= 512
    summ, code = arrivals(preset("summarisation", num_requests=200)), arrivals(preset("code", num_requests=200))
    assert statistics.mean(a.prompt_tokens for a in summ) > 5 * statistics.mean(a.output_tokens for a in summ)
    assert statistics.mean(a.output_tokens for a in code) > 3 * statistics.mean(a.prompt_tokens for a in code)


@pytest.mark.parametrize("change, words", [
    (dict(request_rate=0), "request rate"), (dict(request_rate=math.nan), "request rate"),
    (dict(burstiness=-1), "burstiness"), (dict(num_requests=0), "number of requests"),
    (dict(prompt=Lengths(-5)), "prompt length"), (dict(output=Lengths(5, spread=math.inf)), "spread"),
    # what the property test below found, each a traceback before: the gap's scale divided by zero or overflowed,
    # the log-normal's sigma squared overflowed
    (dict(request_rate=6.3e-176, burstiness=6.3e-176), "request rate"), (dict(request_rate=1.7e308), "request rate"),
    (dict(burstiness=1.7e308), "burstiness"), (dict(prompt=Lengths(64, spread=8.2e190)), "prompt length spread"),
    (dict(output=Lengths(10**7)), "output length"),
])
def test_bad_workloads_get_one_clear_line(change, words):
    with pytest.raises(EngineError, match=words):
        arrivals(preset("chat", **change))
    with pytest.raises(EngineError, match="unknown workload preset"):
        preset("poetry")


numbers = st.none() | st.floats() | st.integers(-5, 10**7)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from([None, *PRESETS]), rate=numbers, burstiness=numbers, prompt=st.none() | st.integers(-2, 10**7),
       prompt_spread=numbers, output=st.none() | st.integers(-2, 10**7), output_spread=numbers,
       n=st.none() | st.integers(-2, 40), seed=st.integers(0, 2**64))
def test_any_workload_values_give_arrivals_in_order_or_one_clear_line(name, rate, burstiness, prompt, prompt_spread,
                                                                      output, output_spread, n, seed):
    """The Traffic lab's inputs and `engine measure`'s flags: any values (hypothesis) are refused by EngineError or
    give arrivals at finite, ordered times with lengths within the workload's bounds."""
    try:
        w = shaped(name, request_rate=rate, burstiness=burstiness, prompt_tokens=prompt, prompt_spread=prompt_spread,
                   output_tokens=output, output_spread=output_spread, num_requests=n)
        got = arrivals(w, seed)
    except EngineError as exc:
        assert "\n" not in str(exc)
        return
    assert len(got) == w.num_requests and all(math.isfinite(a.at_s) and a.at_s >= 0 for a in got)
    assert [a.at_s for a in got] == sorted(a.at_s for a in got)
    assert all(w.prompt.low <= a.prompt_tokens <= w.prompt.high and w.output.low <= a.output_tokens <= w.output.high
               for a in got)


def test_goodput_counts_only_requests_within_both_objectives():
    slo = SLO(ttft_s=1.0, tpot_s=0.1)
    outcomes = [Outcome(0.0, 0.5, 0.05, 2.0), Outcome(0.0, 1.5, 0.05, 3.0),  # good; TTFT too slow
                Outcome(1.0, 0.2, 0.2, 4.0), Outcome(2.0, 0.3, None, 4.0),  # TPOT too slow; one token: good
                Outcome(3.0, None, None, 4.0)]  # failed
    assert goodput(outcomes, slo) == pytest.approx(2 / 4.0)
    assert throughput(outcomes) == pytest.approx(4 / 4.0)
    with pytest.raises(EngineError, match="TTFT objective"):
        goodput(outcomes, SLO(0, 0.1))
    with pytest.raises(EngineError, match="TPOT objective"):
        goodput(outcomes, SLO(1, math.nan))


def test_percentile_interpolates_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5 and math.isnan(percentile([], 50))
    assert percentile([0, 10], 90) == pytest.approx(9.0)
