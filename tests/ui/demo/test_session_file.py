"""A whole session in one file: every run back in order (the shown one with its captures), single-run files open
too, and a bad file is refused with one line and no runs."""
import json

import pytest

import engine
from engine.core.trace_file import MAX_FILE_BYTES, TraceFileError, trace_bytes
from ui.demo import session_file
from ui.engine_link.run_store import RunStore


@pytest.fixture(scope="module")
def store(tiny_llama):
    kept = RunStore()
    for n in (4, 7):
        kept.keep(engine.generate(tiny_llama, "The valley and the bridge " * n, n, capture_attention=True,
                                  ignore_eos=True))
    return kept


def test_every_run_comes_back_in_order_the_shown_one_whole(store):
    data = session_file.session_bytes(store.history, store.last_trace, title="Lesson 3")
    assert json.loads(data)["kind"] == session_file.KIND and json.loads(data)["title"] == "Lesson 3"
    runs = session_file.read_session(data, "lesson.json")
    assert [(t.n_prompt, t.n_output) for t in runs] == [(t.n_prompt, t.n_output) for t in store.history]
    assert [t.prefill_seconds for t in runs] == [t.prefill_seconds for t in store.history]
    assert runs[0].attention is None and runs[-1].attention is not None  # the history is light, the shown run whole
    assert session_file.file_name(store.history).endswith("-2runs.json")


def test_a_single_run_file_opens_as_a_session_of_one(store):
    runs = session_file.read_session(trace_bytes(store.last_trace), "one.json")
    assert len(runs) == 1 and runs[0].output_ids == store.last_trace.output_ids


@pytest.mark.parametrize("mutate, says", [
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.update(runs=[]), "no runs"),
    (lambda d: d["runs"][1].pop("prompt_ids"), "run 2 of 2"),
    (lambda d: d["runs"].__setitem__(0, "nonsense"), "run 1 of 2 is not a trace"),
    (lambda d: d.update(runs=[d["runs"][0]] * (session_file.MAX_RUNS + 1)), "at most"),
])
def test_a_bad_session_is_refused_in_one_line(store, mutate, says):
    parsed = json.loads(session_file.session_bytes(store.history))
    mutate(parsed)
    with pytest.raises(TraceFileError) as err:
        session_file.read_session(json.dumps(parsed).encode(), "bad.json")
    assert says in str(err.value) and "\n" not in str(err.value) and "bad.json" in str(err.value)


@pytest.mark.parametrize("data, says", [
    (b"", "empty"), (b"\xff\xfe", "UTF-8"), (b'{"kind": "two-bends-session", "runs": [', "truncated"),
    (b"[1, 2]", "not a usable trace"),
])
def test_bytes_that_are_no_session_get_the_trace_checks_line(data, says):
    with pytest.raises(TraceFileError, match=says):
        session_file.read_session(data, "x.json")


def test_too_big_a_file_is_refused_before_parsing():
    with pytest.raises(TraceFileError, match="at most"):
        session_file.read_session(b" " * (MAX_FILE_BYTES + 1), "huge.json")


def test_an_empty_session_is_not_saved():
    with pytest.raises(TraceFileError, match="no run"):
        session_file.session_bytes([])
