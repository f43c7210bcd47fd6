"""Choosing the presets from measured rates: each aims at its verdict, inside the sliders and the context."""
from types import SimpleNamespace

import pytest

from ui.text import diagnosis, preset_lengths

CPU = preset_lengths.Rates(((16, 0.096), (256, 0.5), (1024, 2.184)), 0.065, "SmolLM2 on 2 cores")  # the numbers
GPU = preset_lengths.Rates(((16, 0.008), (256, 0.010), (1024, 0.016)), 0.009, "a fast GPU")


@pytest.mark.parametrize("rates", [CPU, GPU])
def test_each_preset_is_predicted_to_show_its_verdict(rates):
    chosen = preset_lengths.choose(rates, 1024, 512)
    for verdict, p in chosen.items():
        assert diagnosis.verdict_of(p.predicted_share) == verdict, p
        assert 1 <= p.prompt_tokens <= 1024 and 1 <= p.output_tokens <= 512
    assert chosen["prefill"].example == "summarisation" and chosen["decode"].example == "chat"


def test_cpu_presets_are_short_runs():
    chosen = preset_lengths.choose(CPU, 1024, 512)
    assert chosen["prefill"].prompt_tokens == 1024 and chosen["prefill"].output_tokens >= 2
    assert abs(chosen["even"].predicted_share - 0.5) < 0.05 and chosen["even"].output_tokens >= 8
    assert chosen["decode"].prompt_tokens == 16 and chosen["decode"].output_tokens <= 64


def test_how_chosen_states_the_measured_rates():
    text = preset_lengths.how_chosen(CPU)
    assert "TTFT 96 ms at 16, 500 ms at 256, 2,184 ms at 1,024 prompt tokens; a decode step 65.0 ms on average" in text


def _probe_run(n_prompt: int, prefill_s: float, steps_s: list[float]):
    return SimpleNamespace(n_prompt=n_prompt, prefill_seconds=prefill_s, model="m",
                           steps=[SimpleNamespace(seconds=s) for s in steps_s])


def test_the_probes_step_is_the_mean_so_a_stall_counts_as_the_run_will_count_it():
    """A request's decode time is the sum of its steps: one step in four stalled at 90 ms among 30 ms steps makes the
    mean 45 ms (the median would say 30 ms and the even preset would come out decode-heavy)."""
    stalled = [0.030, 0.030, 0.030, 0.090] * 2
    rates = preset_lengths.rates_from_traces([_probe_run(16, 0.2, stalled), _probe_run(16, 0.1, stalled),
                                              _probe_run(256, 0.6, stalled)])
    assert rates.tpot_s == pytest.approx(0.045)
    assert rates.points == ((16, 0.1), (256, 0.6))  # the fastest of each length: a first request's cold start left out
    assert preset_lengths.rates_from_traces([_probe_run(16, 0.0, stalled)]) is None  # nothing measured


def test_labels_do_not_promise_lengths_the_slider_decides():
    from ui.text import prompts
    labels = {e.key: e.label for e in prompts.examples()}
    assert "long input, short output" not in labels["summarisation"]
    assert all("input" not in label and "output" not in label for label in labels.values())



TINY = preset_lengths.Rates(((16, 0.002), (224, 0.0024)), 0.0004, "a tiny random model")  # CI's tiny-llama, measured


def test_clear_cut_presets_survive_a_stall_on_a_millisecond_model():
    chosen = preset_lengths.choose(TINY, 224, 240)
    decode = chosen["decode"]  # a 10 ms stall in its 2 ms prefill still leaves it decode-heavy
    decode_s = (decode.output_tokens - 1) * TINY.tpot_s
    assert diagnosis.verdict_of((0.002 + preset_lengths.HICCUP_SECONDS) / (0.012 + decode_s)) == "decode", decode
    prefill = chosen["prefill"]  # a stall in its decode steps (if any) still leaves it prefill-heavy
    prefill_s, steps_s = TINY.ttft(224), (prefill.output_tokens - 1) * TINY.tpot_s
    stall = preset_lengths.HICCUP_SECONDS if steps_s else 0.0
    assert diagnosis.verdict_of(prefill_s / (prefill_s + steps_s + stall)) == "prefill", prefill


def test_a_preset_run_that_ended_its_answer_early_is_still_reported():
    """The chat preset once asked for 21 tokens and the model ended its answer at 20: the page then said nothing about
    the preset at all. A run that asked for the preset's lengths is the preset's, and the line says why it is short."""
    from types import SimpleNamespace

    preset = preset_lengths.Preset("decode", 16, 21, 0.1, "chat")
    short = SimpleNamespace(prompt_tokens=16, output_tokens=20, prefill_share=0.12)
    line = preset_lengths.outcome(preset, short, asked_tokens=21)
    assert line.startswith("Preset **Decode-heavy** (16 → 21 tokens, predicted 10% prefill): measured 12% prefill, "
                           "decode-heavy — as named.")
    assert line.endswith("The model ended its answer after 20 of the 21 tokens (end of text), so decode ran fewer "
                         "steps than planned.")
    whole = SimpleNamespace(prompt_tokens=16, output_tokens=21, prefill_share=0.8)
    assert preset_lengths.outcome(preset, whole, asked_tokens=21).endswith("prefill-heavy — not decode-heavy this time: run "
                                                                      "it again.")
    assert preset_lengths.outcome(preset, short, asked_tokens=32) is None  # another run's lengths: not the preset's
    assert preset_lengths.outcome(preset, short) is None  # nothing asked known: its output must match
