"""ui/room/polls.py: the question bank, one answer per session, Measure once at a time, each experiment on the tiny
model (run directly, as the worker would), CSV; and fig_poll's histogram."""
import json
import subprocess
import sys

import pytest

from engine.labs import remedies, sweeps
from tests import ROOT
from ui.figures import fig_poll
from ui.room import polls

TARGETS = {"sweeps.prompt_lengths": sweeps.sweep_prompt_lengths, "sweeps.output_lengths": sweeps.sweep_output_lengths,
           "sweeps.batch_sizes": sweeps.sweep_batch_sizes, "remedies.kv_cache": remedies.measure_kv_cache}


def test_the_shipped_bank_loads_with_every_question_measurable():
    questions, problems = polls.load_bank()
    assert problems == []
    assert len(questions) >= 5 and all(q.experiment is not None for q in questions)
    assert {q.measure["experiment"] for q in questions} == set(polls.EXPERIMENTS)


def test_a_file_with_bad_fields_is_skipped_with_one_line(tmp_path):
    good = json.loads((polls.BANK_DIR / "1-double-the-prompt.json").read_text())
    (tmp_path / "a-good.json").write_text(json.dumps(good))
    (tmp_path / "b-typo.json").write_text(json.dumps(dict(good, id="b", optoins=[])))
    (tmp_path / "c-one-option.json").write_text(json.dumps(dict(good, id="c", options=["only"])))
    (tmp_path / "d-bad-experiment.json").write_text(json.dumps(dict(good, id="d", measure={"experiment": "magic"})))
    (tmp_path / "e-bad-number.json").write_text(json.dumps(dict(good, id="e", measure={"experiment": "prompt_ttft", "tokens": 10**6})))
    (tmp_path / "f-not-json.json").write_text("{ nope")
    questions, problems = polls.load_bank(tmp_path)
    assert [q.id for q in questions] == ["double-the-prompt"]
    assert len(problems) == 5 and all("\n" not in p and p.endswith("skipped") for p in problems)
    assert "optoins" in problems[0] and "2 to 8" in problems[1] and "prompt_ttft" in problems[2]
    assert "4 to 1024" in problems[3] and problems[4].startswith("f-not-json.json")


def test_one_answer_per_session_changeable_until_closed():
    q = polls.load_bank()[0][0]
    poll = polls.Poll(q)
    poll.answer("s1", 0)
    poll.answer("s1", 2)  # changed its mind
    poll.answer("s2", 1)
    assert poll.counts() == [0, 1, 1] and poll.answer_of("s1") == 2
    poll.set_open(False)
    with pytest.raises(polls.PollError, match="closed"):
        poll.answer("s1", 0)
    with pytest.raises(polls.PollError, match="not one of"):
        polls.Poll(q).answer("s3", 7)


def test_a_second_measure_while_one_runs_gets_one_clear_line():
    poll = polls.Poll(polls.load_bank()[0][0])
    poll.begin_measure(now=100.0)
    with pytest.raises(polls.PollError, match="already running") as err:
        poll.begin_measure(now=105.0)
    assert "\n" not in str(err.value)
    poll.end_measure(None)  # failed or cancelled: a new one may start
    poll.begin_measure(now=110.0)
    poll.end_measure(polls.Measured(2.0, "TTFT ×2.00"))
    assert poll.matched == 1 and poll.measuring_since is None


def test_nearest_option_on_a_log_scale_and_categorical_keys():
    questions = {q.id: q for q in polls.load_bank()[0]}
    q = questions["double-the-prompt"]
    assert q.match(polls.Measured(1.3, "")) == 0 and q.match(polls.Measured(1.5, "")) == 1
    assert q.match(polls.Measured(3.1, "")) == 2
    remedy = questions["which-remedy"]
    assert remedy.match(polls.Measured(None, "", "kv_cache")) == 0 and remedy.match(polls.Measured(None, "", "neither")) == 2


@pytest.mark.parametrize("name", list(polls.EXPERIMENTS))
def test_every_experiment_runs_on_the_tiny_model_and_reads_one_figure(name, tiny_llama):
    exp = polls.EXPERIMENTS[name]
    small = {k: lo if k != "riders" else 2 for k, (_, lo, _) in exp.params.items()}
    args, kwargs = exp.call(small)
    exp.job.bind(args, kwargs)  # the worker's own check of the arguments
    result = TARGETS[exp.job.name](tiny_llama, *args, **kwargs)
    measured = exp.read(result, small)
    assert measured.text and "\n" not in measured.text
    if name == "kv_cache_bridge":
        assert measured.key in ("kv_cache", "neither") and measured.value is None
    else:
        assert measured.value > 0


def test_csv_has_one_row_per_option_with_the_measurement():
    q = polls.load_bank()[0][0]
    poll = polls.Poll(q)
    for sid, i in [("a", 1), ("b", 1), ("c", 0)]:
        poll.answer(sid, i)
    poll.end_measure(polls.Measured(1.9, "TTFT ×1.90: 10.0 → 19.0 ms (128 → 256)"))
    text = polls.to_csv([poll])
    lines = text.strip().splitlines()
    assert len(lines) == 1 + len(q.options) and lines[0].startswith("poll,question_id,question,option")
    assert ",2,0.667,3,1.9," in lines[2] and lines[2].endswith(",True," + lines[2].split(",")[-1])


def test_a_written_question_reads_values_from_its_options():
    q = polls.written_question("Prompt ×2: TTFT?", "×1\n\n×2\n×4", "prompt_ttft", {"tokens": 64})
    assert [o.value for o in q.options] == [1.0, 2.0, 4.0] and q.measure == {"experiment": "prompt_ttft", "tokens": 64}
    with pytest.raises(polls.PollError, match="2 to 8"):
        polls.written_question("One option?", "×1")
    assert json.loads(q.to_json())["options"][1] == {"label": "×2", "value": 2.0}


def test_histogram_marks_the_measured_option_with_text_as_well_as_colour():
    fig = fig_poll.poll_figure(["×1", "×2", "×4"], [1, 6, 1], matched=1, measured_text="TTFT ×1.9")
    bar = fig.data[0]
    assert list(bar.x) == [1, 6, 1] and fig_poll.MEASURED_MARK in bar.text[1] and "75%" in bar.text[1]
    assert bar.marker.pattern.shape[1] == "/" and "TTFT ×1.9" in fig.layout.title.text
    assert fig_poll.poll_figure(["a", "b"], [0, 0]).data[0].text == ("0", "0")


def test_polls_module_stays_streamlit_free():
    code = "import sys, ui.room.polls, ui.figures.fig_poll; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
