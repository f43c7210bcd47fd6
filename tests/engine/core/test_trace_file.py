"""Recorded traces: the packed JSON round trip, every bad file refused in one line, and `engine show`."""
import json
import math

import numpy as np
import pytest

import engine
from engine import cli
from engine.core import trace_file
from engine.core.trace import SCHEMA_VERSION, pack_array, unpack_array
from engine.core.trace_file import MAX_FILE_BYTES, TraceFileError, read_trace


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return engine.generate(tiny_llama, "The valley and the bridge", 5, capture_attention=True, ignore_eos=True)


@pytest.fixture(scope="module")
def good(trace) -> dict:
    return json.loads(trace_file.trace_bytes(trace, "a test run"))


def changed(good: dict, **fields) -> bytes:
    return json.dumps(dict(good, **fields)).encode()


def test_round_trip_keeps_timings_text_and_captures(trace):
    back = read_trace(trace_file.trace_bytes(trace, "a test run"))
    assert back.steps == trace.steps and back.prefill_seconds == trace.prefill_seconds
    assert back.text == trace.text and back.output_tokens == trace.output_tokens
    assert back.attention.layers == trace.attention.layers
    np.testing.assert_array_equal(back.attention.prefill[1], trace.attention.prefill[1])  # float16 kept exactly
    np.testing.assert_array_equal(back.attention.decode[0][-1], trace.attention.decode[0][-1])
    np.testing.assert_array_equal(back.kv_key_norms, trace.kv_key_norms)
    assert back.settings["recording"]["title"] == "a test run" and back.settings["recording"]["date"]
    assert "model_spec" not in back.settings  # a recorded run never asks a model for more layers
    assert back.schema_version == SCHEMA_VERSION


def test_packed_arrays_are_much_smaller_than_lists():
    array = np.random.default_rng(0).random((9, 64, 64)).astype(np.float16)
    packed = json.dumps(pack_array(array))
    assert len(packed) < len(json.dumps(np.round(array.astype(np.float32), 5).tolist())) / 3
    np.testing.assert_array_equal(unpack_array(json.loads(packed)), array)


def test_schema_2_lists_of_numbers_still_load(trace, good):
    old = dict(good, schema_version=2)
    old["attention"] = dict(layers=trace.attention.layers,
                            prefill=[m.astype(float).tolist() for m in trace.attention.prefill],
                            decode=[[r.astype(float).tolist() for r in rows] for rows in trace.attention.decode])
    old["kv_key_norms"] = trace.kv_key_norms.astype(float).tolist()
    old["kv_value_norms"] = trace.kv_value_norms.astype(float).tolist()
    back = read_trace(json.dumps(old).encode())
    np.testing.assert_allclose(back.attention.prefill[0], trace.attention.prefill[0], atol=1e-3)


def _filled(packed: dict, value: float) -> dict:
    """A packed array of the same shape, every value `value`."""
    return pack_array(np.full(unpack_array(packed).shape, value, np.float16))


BAD_FILES = {
    "empty": (lambda g: b"", "is empty"),
    "blank": (lambda g: b"  \n ", "is empty"),
    "not JSON": (lambda g: b"Two Bends rocks", "is not a JSON file"),
    "binary": (lambda g: bytes(range(256)), "not even UTF-8"),
    "truncated": (lambda g: json.dumps(g).encode()[: len(json.dumps(g)) // 2], "is truncated"),
    "truncated short": (lambda g: b'{"schema_version": 3, "model": "x"', "is truncated"),
    "a JSON list": (lambda g: b"[1, 2, 3]", "a JSON list, not a trace object"),
    "a JSON number": (lambda g: b"42", "a JSON int, not a trace object"),
    "another schema": (lambda g: b'{"name": "my notes", "rows": []}', "not a Two Bends trace"),
    "future schema": (lambda g: changed(g, schema_version=SCHEMA_VERSION + 1), "written by a newer Two Bends"),
    "schema as text": (lambda g: changed(g, schema_version="3"), "'schema_version' must be a whole number"),
    "missing field": (lambda g: json.dumps({k: v for k, v in g.items() if k != "steps"}).encode(), "'steps' is missing"),
    "unknown field": (lambda g: changed(g, favourite_colour="blue"), "'favourite_colour' is not part of"),
    "text not Unicode": (lambda g: changed(g, text="a\ud800b"), "'text' is not valid Unicode text"),  # a page fails on it
    "key not Unicode": (lambda g: changed(g, env=dict(g["env"], **{"\udfff": 1})), "a key in field 'env' is not valid"),
    "model as number": (lambda g: changed(g, model=7), "'model' must be a string"),
    "model with markup": (lambda g: changed(g, model="<b>x</b>"), "'model' has characters"),
    "ids as text": (lambda g: changed(g, prompt_ids="1 2 3"), "'prompt_ids' must be a list of token ids"),
    "steps as object": (lambda g: changed(g, steps={"seconds": 1}), "'steps' must be a list"),
    "negative TTFT": (lambda g: changed(g, prefill_seconds=-0.5), "'prefill_seconds' must be a finite number"),
    "NaN TTFT": (lambda g: json.dumps(dict(g, prefill_seconds=math.nan)).encode(), "'prefill_seconds' must be a finite"),
    "infinite TTFT": (lambda g: json.dumps(dict(g, prefill_seconds=math.inf)).encode(), "must be a finite number"),
    "NaN step": (lambda g: changed(g, steps=[dict(g["steps"][0], seconds=math.nan)] + g["steps"][1:]),
                 "'steps[0].seconds' must be a finite"),
    "negative step": (lambda g: changed(g, steps=g["steps"][:2] + [dict(g["steps"][2], seconds=-1)] + g["steps"][3:]),
                      "'steps[2].seconds' must be a finite"),
    "step as text": (lambda g: changed(g, steps=[dict(g["steps"][0], seconds="fast")]), "must be a number of seconds"),
    "negative queue": (lambda g: changed(g, queue_seconds=-1), "'queue_seconds' must be a finite"),
    "too many steps": (lambda g: changed(g, steps=g["steps"] * 3), "decode steps for"),
    "wrong capture shape": (lambda g: changed(g, attention=dict(g["attention"], prefill=[pack_array(
        np.zeros((1, 2, 2), np.float16))] + g["attention"]["prefill"][1:])), "'attention.prefill[0]' has shape"),
    "attention above 1": (lambda g: changed(g, attention=dict(g["attention"], prefill=[_filled(
        g["attention"]["prefill"][0], 2.0)] + g["attention"]["prefill"][1:])), "'attention.prefill[0]' holds 2; its values"),
    "NaN attention": (lambda g: changed(g, attention=dict(g["attention"], decode=[[_filled(
        g["attention"]["decode"][0][0], math.nan)] + g["attention"]["decode"][0][1:]] + g["attention"]["decode"][1:])),
        "'attention.decode[0][0]' holds values that are not finite"),
    "negative norm": (lambda g: changed(g, kv_value_norms=_filled(g["kv_value_norms"], -1.0)),
                      "'kv_value_norms' holds -1; its values must be 0 or more"),
    "damaged capture": (lambda g: changed(g, kv_key_norms=dict(g["kv_key_norms"], zlib_base64="AAAA")), "damaged"),
    "capture bomb": (lambda g: changed(g, kv_key_norms=dict(g["kv_key_norms"], shape=[10**6, 10**3])), "once unpacked"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_are_refused_in_one_line(good, case):
    make, expected = BAD_FILES[case]
    with pytest.raises(TraceFileError) as info:
        read_trace(make(good), "run.json")
    message = str(info.value)
    assert expected in message, message
    assert "\n" not in message and message.startswith("run.json ") and len(message) < 400


def test_a_file_over_50_mb_is_refused_before_it_is_parsed(tmp_path):
    big = tmp_path / "huge.json"
    with open(big, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no 50 MB written to disk
    with pytest.raises(TraceFileError, match=r"huge.json is 50.0 MB; a recorded trace may be at most 50 MB"):
        trace_file.load_trace(big)
    with pytest.raises(TraceFileError, match="at most 50 MB"):
        read_trace(b" " * (MAX_FILE_BYTES + 1))


def test_show_prints_the_generate_summary_without_a_model(trace, tmp_path, capsys, monkeypatch):
    path = trace_file.save_trace(trace, tmp_path / "run.json", "a test run")

    def no_model(*args, **kwargs):
        raise AssertionError("show must not load a model")

    monkeypatch.setattr("engine.loading.loader.load_model", no_model)
    assert cli.main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    summary = engine.core.metrics.format_summary(engine.summarize(trace))
    assert summary in out  # the very table `generate` prints
    assert out.startswith("recorded run: a test run — tiny-llama") and "model tiny-llama" in out


def test_show_refuses_each_bad_file_with_one_line(good, tmp_path, capsys):
    for case, (make, expected) in BAD_FILES.items():
        path = tmp_path / f"{case.replace(' ', '_')}.json"
        path.write_bytes(make(good))
        assert cli.main(["show", str(path)]) == 2, case
        captured = capsys.readouterr()
        assert captured.out == "", case
        assert captured.err.count("\n") == 1 and expected in captured.err, (case, captured.err)
    assert cli.main(["show", str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_show_never_prints_terminal_escapes(good, tmp_path, capsys):
    path = tmp_path / "escape.json"
    path.write_bytes(changed(good, text="hi \x1b]0;owned\x07 there"))
    assert cli.main(["show", str(path)]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_a_run_measured_on_a_server_saves_and_opens(tmp_path):
    """Shaped like engine.serving's measured runs: ids unknown (-1), no config, captures or cache picture."""
    trace = engine.Trace(model="smollm2-135m-instruct", device="server 127.0.0.1:8000/v1", dtype="as served",
                         prompt_ids=[-1] * 12, output_ids=[-1] * 4, text="Hello <b>there</b>", prefill_seconds=0.05,
                         steps=[engine.DecodeStep(0.01, 12 + k, 0) for k in range(1, 4)],
                         env={"device_name": "a server at http://127.0.0.1:8000/v1", "threads": "?", "torch": "?"},
                         settings={"url": "http://127.0.0.1:8000/v1", "server_metrics": {"ttft": 0.04}}, source="server")
    back = trace_file.load_trace(trace_file.save_trace(trace, tmp_path / "server.json", "measured on a server"))
    assert back.source == "server" and back.model_config is None and back.steps == trace.steps
    assert engine.summarize(back) == engine.summarize(trace)


def test_the_cpu_wait_round_trips_per_step_and_in_total(trace):
    back = read_trace(trace_file.trace_bytes(trace))
    assert [s.cpu_wait_seconds for s in back.steps] == [s.cpu_wait_seconds for s in trace.steps]
    assert back.cpu_wait_seconds == trace.cpu_wait_seconds and back.cpu_wait_note == trace.cpu_wait_note
    assert back.prefill_cpu_wait_seconds == trace.prefill_cpu_wait_seconds
    assert back.cpu_wait_read_seconds == trace.cpu_wait_read_seconds


def test_a_schema_3_file_without_the_cpu_wait_loads_as_not_measured(good):
    new_fields = ("prefill_cpu_wait_seconds", "cpu_wait_seconds", "cpu_wait_all_threads_seconds", "cpu_wait_note",
                  "cpu_wait_read_seconds")
    old = {k: v for k, v in good.items() if k not in new_fields} | {"schema_version": 3}
    old["steps"] = [{k: v for k, v in s.items() if k != "cpu_wait_seconds"} for s in good["steps"]]
    back = read_trace(json.dumps(old).encode())
    assert back.cpu_wait_seconds is None and back.decode_cpu_wait_seconds == 0.0 and back.cpu_wait_note == ""


@pytest.mark.parametrize("fields, words", [
    (dict(cpu_wait_seconds=-1.0), "cpu_wait_seconds"),
    (dict(cpu_wait_note="[a link](http://x)"), "cpu_wait_note"),
])
def test_a_bad_cpu_wait_is_refused(good, fields, words):
    with pytest.raises(TraceFileError, match=words):
        read_trace(changed(good, **fields))


def test_the_shipped_example_traces_still_load():
    from tests import ROOT

    paths = sorted((ROOT / "assets" / "traces").glob("*.json"))
    assert paths and all(trace_file.load_trace(path).n_output > 0 for path in paths)


def test_a_file_cut_inside_a_number_is_called_truncated():
    """Cut after a decimal point or an exponent's 'e' the parser reports a missing delimiter at the last character:
    still a truncated file, not 'not a JSON file' (seen in CI when a cut at 700 bytes fell inside a float)."""
    from engine.core.trace_file import TraceFileError, read_trace

    for data in (b'{"steps": [0.5, 2.', b'{"seconds": 1e', b'{"x": -'):
        with pytest.raises(TraceFileError, match="is truncated"):
            read_trace(data, "cut.json")
    with pytest.raises(TraceFileError, match="not a JSON file"):
        read_trace(b'{"x": [1, y]}', "bad.json")
