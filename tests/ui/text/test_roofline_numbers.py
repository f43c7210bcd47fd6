"""ui/text/roofline_numbers.py: the roofline and budget labs' numbers, moved out of the pages."""
import math
from types import SimpleNamespace

from engine.core.metrics import summarize
from engine.core.trace import DecodeStep, Trace
from ui.text import roofline_numbers as rn


def test_peak_metrics_word_the_measured_peaks_and_their_ridge():
    peaks = SimpleNamespace(copy_bytes_per_s=20e9, matmul_flops_per_s=100e9)
    assert rn.peak_metrics(peaks) == [("Copy bandwidth (measured, read + write)", "20.0 GB/s"),
                                      ("Matmul FLOP/s (measured)", "100.0 GFLOP/s"), ("Ridge point (matmul ÷ copy)", "5.0 FLOP/byte")]


def test_hardware_caption_states_the_spec_sheet():
    assert rn.hardware_caption("NVIDIA H100 SXM").startswith("NVIDIA H100 SXM: 989.5 TFLOP/s, 3350 GB/s, ridge 295 FLOP/byte")
    assert "estimate" in rn.hardware_caption("Apple M3 Max (40-core GPU)")  # its TFLOP/s is not a spec sheet


def test_prefill_share_from_a_measured_run_or_a_preset():
    assert rn.measured_share(None) is None
    trace = Trace(model="hand", device="cpu", dtype="float32", prompt_ids=[1, 2, 3], output_ids=[4, 5, 6],
                  prefill_seconds=0.1, steps=[DecodeStep(0.2, 4, 0), DecodeStep(0.2, 5, 0)], text="", env={})
    share, note = rn.measured_share(trace)
    assert math.isclose(share, summarize(trace).prefill_share) and math.isclose(share, 0.2)
    assert note == "a recording, not measured in this session: TTFT 100 ms of 500 ms end to end (3 in / 3 out, hand)"
    trace.settings["model_spec"] = ["hand", "cpu", "float32", "plain"]  # what the run panel adds to a run it measured
    assert rn.measured_share(trace)[1].startswith("measured on this machine in this session: TTFT 100 ms")
    trace.source = "server"
    assert rn.measured_share(trace)[1].startswith("measured over HTTP from a server in this session: TTFT")
    model, hw, workload = next(iter(rn.MODEL_PRESETS)), next(iter(rn.HARDWARE_PRESETS)), next(iter(rn.WORKLOAD_PRESETS))
    share, note = rn.preset_share(model, hw, workload)
    assert 0 < share < 1 and note.startswith("estimate: TTFT ") and note.endswith(f"on {hw} (the card model)")
    share, note = rn.preset_share("Llama-2 70B (GQA, 8 KV heads)", "NVIDIA H100 SXM", "Chat")
    assert 0 < share < 1 and note.endswith("on 2 x NVIDIA H100 SXM (the card model)")  # the fewest cards that hold it
    share, note = rn.preset_share("Llama-2 70B (GQA, 8 KV heads)", "Apple M3 Max (40-core GPU)", "Chat")
    assert share == rn.FABLE_SHARE and "does not fit" in note  # one line, never a crash of the budget page


def test_class_table_gives_every_efficiency_its_source():
    rows = rn.class_table()
    assert {r["parameter"] for r in rows} >= {"mfu", "mbu", "layer_s", "pass_s", "overlap"}
    assert all(r["source"] and r["range"] for r in rows)
    assert "Maximum Achievable Matmul" in rn.CARD_MODEL_NOTE or "card_model" in rn.CARD_MODEL_NOTE
    assert "compute-bound only once" in rn.INTRO


def test_amdahl_and_the_fable_come_from_the_budget_model():
    assert math.isclose(rn.amdahl(rn.FABLE_SHARE, 2.0, 1.0).speedup, 1 / (0.2 / 2 + 0.8))
    assert set(rn.fable()) == set(rn.FABLE_SCENARIOS)


def test_share_in_words():
    from ui.text import roofline_numbers as rn
    assert [rn.share_in_words(s) for s in (0.2, 0.25, 0.5, 0.37)] == ["a fifth", "a quarter", "half", "37%"]
    assert "a fifth" in rn.FABLE_NOTE and "under" not in rn.FABLE_NOTE
