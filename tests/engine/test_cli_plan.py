"""`python -m engine plan`: the card model from the command line, JSON or a table, one clear line for a bad key."""
import json

import pytest

from engine import cli
from engine.labs import hardware
from engine.perfmodel import card_model as cm
from engine.perfmodel.cards import card
from engine.perfmodel.model_shapes import model_shape

ISSUE_EXAMPLE = ["plan", "--model", "llama-2-7b", "--gpu", "a100-80gb", "--dtype", "float16", "--prompt-tokens", "2048",
                 "--output-tokens", "128", "--batch", "1", "--json"]


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_issue_example_prints_the_plan_as_json(capsys):
    rc, out, _ = run(capsys, *ISSUE_EXAMPLE)
    assert rc == 0
    r = json.loads(out)
    shape = model_shape("llama-2-7b")
    expected = cm.plan(cm.Setup(shape.config, card("a100-80gb"), "float16", 1, shape.name), 2048, 128)
    assert r["ttft_ms"] == pytest.approx(expected.ttft_s * 1e3) and r["tpot_ms"] == pytest.approx(expected.tpot_s * 1e3)
    assert r["prefill_bound"] == "compute" and r["decode_bound"] == "memory"
    for key in ("mfu", "mbu", "layer_overhead_us", "pass_overhead_ms", "ridge_flop_per_byte", "crossover_prompt_tokens",
                "crossover_batch", "kv_bytes_per_token", "max_sequences", "max_sequences_if_mha", "cost"):
        assert key in r
    assert r["parameters"]["mfu"]["source"] and r["parameters"]["mbu"]["low"] < r["mbu"] <= r["parameters"]["mbu"]["high"]
    assert r["what"].startswith("estimate") and "datasheet" in r["card_source"]
    assert [c["batch"] for c in r["cost"]] == [1, r["max_sequences"]] and r["cost"][1]["wanted_batch"] == 64
    assert r["cost"][1]["decode_device_s"] < r["cost"][0]["decode_device_s"] / 10  # riders share a step


def test_the_table_says_what_bounds_each_phase_and_where_numbers_come_from(capsys):
    rc, out, _ = run(capsys, "plan", "--model", "smollm2-135m", "--gpu", "h100-sxm", "--price", "2.5")
    assert rc == 0
    assert "bound by overhead" in out  # a 135 M model on an H100: launches, not bytes
    assert "mfu = " in out and "range" in out and "$" in out


def test_tensor_parallelism_from_the_command_line(capsys):
    rc, _, err = run(capsys, "plan", "--model", "llama-2-70b", "--gpu", "a100-80gb")
    assert rc == 2 and "does not fit" in err and "--gpus 2" in err and "Traceback" not in err
    rc, out, _ = run(capsys, "plan", "--model", "llama-2-70b", "--gpu", "a100-80gb", "--gpus", "4", "--json")
    assert rc == 0 and json.loads(out)["gpus"] == 4


@pytest.mark.parametrize("flag, value, listed", [("--model", "llama-9", "smollm2-135m, gpt2"),
                                                 ("--gpu", "tpu-v9", "a100-80gb, h100-sxm, h200"),
                                                 ("--dtype", "int3", "float32, float16")])
def test_a_bad_key_is_one_line_listing_the_valid_ones(capsys, flag, value, listed):
    rc, out, err = run(capsys, "plan", flag, value)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and listed in err and value in err


def test_this_machine_is_measured_when_asked(capsys, monkeypatch):
    calls = []

    def fake(device, dtype, cfg):
        calls.append(cfg.n_layers)
        return hardware.MeasuredPeaks(40e9, 200e9, "cpu", "float32", 18e9, 16e9, "10:42:00")

    monkeypatch.setattr(hardware, "measure_peaks", fake)
    rc, out, _ = run(capsys, "plan", "--model", "smollm2-135m", "--gpu", "this-cpu", "--dtype", "float32", "--json")
    r = json.loads(out)
    assert rc == 0 and calls == [30]
    assert r["card"] == "this-cpu" and r["measured_at"] == "at 10:42:00" and "measured here at 10:42:00" in r["card_source"]
    assert r["bandwidth_gb_s"] == pytest.approx(18.0)
