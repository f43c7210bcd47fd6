"""ui/room/polls.py: the question bank (ranges that put every measured figure in exactly one option, whose explanation
holds for it), one answer per session that locks at the reveal or at Measure, revotes as new rounds, Measure once at
a time, each experiment on the tiny model (run directly, as the worker would), CSV; and fig_poll's histogram and text."""
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from engine.labs import remedies, sweeps
from tests import ROOT
from ui.figures import fig_poll
from ui.room import poll_experiments, polls

TARGETS = {"sweeps.prompt_lengths": sweeps.sweep_prompt_lengths, "sweeps.output_lengths": sweeps.sweep_output_lengths,
           "sweeps.batch_sizes": sweeps.sweep_batch_sizes, "remedies.kv_cache": remedies.measure_kv_cache}


def test_the_shipped_bank_loads_with_every_question_measurable_and_ranged():
    questions, problems = polls.load_bank()
    assert problems == []
    assert len(questions) >= 5 and all(q.experiment is not None for q in questions)
    assert {q.measure["experiment"] for q in questions} <= set(polls.EXPERIMENTS)
    assert all(o.ranged and o.explain for q in questions for o in q.options)


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


def test_one_answer_per_session_changeable_until_locked():
    q = polls.load_bank()[0][0]
    poll = polls.Poll(q)
    poll.answer("s1", 0)
    poll.answer("s1", 2)  # changed its mind
    poll.answer("s2", 1)
    assert poll.counts() == [0, 1, 1] and poll.answer_of("s1") == 2
    poll.set_open(False)
    with pytest.raises(polls.PollError, match="locked"):
        poll.answer("s1", 0)
    poll.set_open(True)  # nobody has seen the room's answers yet: the teacher may unlock
    poll.answer("s1", 1)
    with pytest.raises(polls.PollError, match="not one of"):
        polls.Poll(q).answer("s3", 7)


def test_answers_lock_at_measure_and_the_pre_reveal_answer_is_what_counts():
    """The issue's room: a student switched ×4 → ×2 after the reveal and the CSV counted 3/3 correct."""
    poll = polls.Poll(polls.load_bank()[0][0])
    for sid, i in [("a", 2), ("b", 2), ("c", 1)]:
        poll.answer(sid, i)
    poll.begin_measure(now=100.0)
    with pytest.raises(polls.PollError, match="locked"):
        poll.answer("a", 1)
    poll.end_measure(polls.Measured(1.9, "TTFT ×1.90"))
    assert poll.revealed and poll.counts() == [0, 1, 2]
    with pytest.raises(polls.PollError, match="revealed or measured"):
        poll.set_open(True)
    rows = [r for r in polls.csv_rows([poll]) if r["matches_measurement"]]
    assert len(rows) == 1 and rows[0]["votes"] == 1  # one of three predicted it, as answered before Measure


def test_reveal_locks_and_a_revote_is_a_new_round_that_keeps_the_first():
    first = polls.Poll(polls.load_bank()[0][0])
    first.answer("a", 2)
    first.reveal()
    assert first.revealed and not first.open
    with pytest.raises(polls.PollError):
        first.answer("a", 1)
    second = first.revote()
    assert second.round == 2 and second.open and not second.revealed and second.counts() == [0, 0, 0]
    assert second.serial != first.serial and second.earlier == [first]
    second.answer("a", 1)
    second.begin_measure(now=1.0)
    second.end_measure(polls.Measured(1.9, "TTFT ×1.90"))
    assert first.measured is second.measured  # the measurement answers both rounds
    rows = polls.csv_rows([first, second])
    assert [r["round"] for r in rows] == [1] * 3 + [2] * 3
    assert [r["votes"] for r in rows] == [0, 0, 1, 0, 1, 0]


def test_the_csv_reads_the_state_when_it_is_built():
    poll = polls.Poll(polls.load_bank()[0][0])
    poll.answer("a", 0)
    before = polls.to_csv([poll])
    poll.answer("b", 0)
    assert polls.to_csv([poll]) != before and ",2," in polls.to_csv([poll]).splitlines()[1]


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


GRID = [round(0.05 * 1.05**k, 4) for k in range(140)]  # 0.05 … ~46, every 5 %


@pytest.mark.parametrize("qid", [q.id for q in polls.load_bank()[0]])
def test_every_measured_figure_lands_in_one_option_and_gets_its_explanation(qid):
    q = {q.id: q for q in polls.load_bank()[0]}[qid]
    bounds = [o.low for o in q.options[1:]]
    for x in GRID + bounds + [b - 1e-9 for b in bounds]:
        holding = [i for i, o in enumerate(q.options) if o.holds(x)]
        assert len(holding) == 1, (qid, x)
        measured = polls.Measured(x, "")
        assert q.match(measured) == holding[0]
        assert q.explanation(measured).startswith(q.options[holding[0]].explain)


def test_eight_riders_at_x4_5_is_not_explained_as_almost_eightfold():
    """The issue's case: a measured ×4.5 read "×2 to ×4" while the explanation said "almost eightfold"."""
    q = {q.id: q for q in polls.load_bank()[0]}["eight-riders"]
    for x in (1.6, 3.0, 4.5, 5.9):
        text = q.explanation(polls.Measured(x, ""))
        assert "eightfold" not in text and "barely more" not in text
        assert "well short of ×8" in q.options[q.match(polls.Measured(x, ""))].label
    assert "eightfold" in q.explanation(polls.Measured(7.6, ""))
    assert "barely more tokens per second" in q.explanation(polls.Measured(1.2, ""))


def test_eight_riders_step_times_follow_from_the_figure():
    """tokens/s with B riders ÷ with one = B × (one rider's step ÷ B riders' step): a figure under the first bound means
    each batched step took more than B ÷ bound as long; the explanation says 'more than five times', which every figure
    in that option's range satisfies."""
    q = {q.id: q for q in polls.load_bank()[0]}["eight-riders"]
    riders, first = q.measure["riders"], q.options[0]
    assert riders / first.high > 5 and "more than five times as long" in first.explain
    assert "nearly eight times" not in first.explain


def test_an_option_label_never_states_physics_its_explanation_denies():
    """The 'about the same' TPOT option is the answer on a machine where the cache is small next to the weights; its
    label must not say a step reads the weights only (it reads the whole KV cache too, as its explanation says)."""
    q = {q.id: q for q in polls.load_bank()[0]}["a-long-prompt"]
    assert "whatever came before" not in q.options[0].label and "read the whole KV cache" in q.options[0].explain


def test_amdahl_bounds_follow_the_share_they_name():
    """valley ×2 gives 1 / (1 − p/2): each option's explanation names the share range its bounds imply."""
    q = {q.id: q for q in polls.load_bank()[0]}["valley-twice-as-fast"]
    low, high = (2 * (1 - 1 / o.low) for o in q.options[1:])  # the shares at the bounds: 40 % and 82.35 %
    assert (round(low, 2), round(high, 2)) == (0.40, 0.82)
    for p in [i / 200 for i in range(1, 200)]:
        text = q.options[q.match(polls.Measured(1 / (1 - p / 2), ""))].explain
        if p < low:
            assert "under 40 %" in text
        elif p < high:
            assert "40 % to 82 %" in text
        else:
            assert "over 82 %" in text


def test_a_bad_range_is_refused_with_one_line(tmp_path):
    good = json.loads((polls.BANK_DIR / "1-double-the-prompt.json").read_text())
    gap = json.loads(json.dumps(good))
    gap["options"][1]["range"] = [1.5, 2.8]
    half = json.loads(json.dumps(good))
    del half["options"][0]["range"]
    endless = json.loads(json.dumps(good))
    endless["options"][2]["range"] = [2.8, 10]
    for i, bad in enumerate((gap, half, endless)):
        with pytest.raises(polls.PollError) as err:
            polls.parse_question(bad)
        assert "\n" not in str(err.value), i


def test_written_questions_still_use_the_nearest_value_and_categorical_keys_still_match():
    q = polls.written_question("Prompt ×2: TTFT?", "×1\n×2\n×4", "prompt_ttft", {"tokens": 64})
    assert q.match(polls.Measured(1.3, "")) == 0 and q.match(polls.Measured(1.5, "")) == 1
    assert q.match(polls.Measured(3.1, "")) == 2
    keyed = polls.parse_question({"question": "Which?", "options": [{"label": "a", "key": "a"}, {"label": "b", "key": "b"}]})
    assert keyed.match(polls.Measured(None, "", "b")) == 1


@pytest.mark.parametrize("name", list(polls.EXPERIMENTS))
def test_every_experiment_runs_on_the_tiny_model_and_reads_one_figure(name, tiny_llama):
    exp = polls.EXPERIMENTS[name]
    small = {k: lo if k != "riders" else 2 for k, (_, lo, _) in exp.params.items()}
    small = {k: (8 if k == "output_tokens" and name == "no_kv_cache" else v) for k, v in small.items()}
    args, kwargs = exp.call(small)
    exp.job.bind(args, kwargs)  # the worker's own check of the arguments
    result = TARGETS[exp.job.name](tiny_llama, *args, **kwargs)
    lm = SimpleNamespace(config=tiny_llama.config, dtype="float32")
    measured = exp.read(result, small, lm)
    assert measured.text and "\n" not in measured.text and measured.value > 0
    assert measured.how == (poll_experiments.COMPUTED if name == "valley_x2" else poll_experiments.MEASURED)
    if name in ("prompt_ttft", "prompt_tpot"):
        assert "computed from the model's shapes" in measured.text


def test_csv_has_one_row_per_option_with_the_measurement():
    q = polls.load_bank()[0][0]
    poll = polls.Poll(q)
    for sid, i in [("a", 1), ("b", 1), ("c", 0)]:
        poll.answer(sid, i)
    poll.end_measure(polls.Measured(1.9, "TTFT ×1.90: 10.0 → 19.0 ms (128 → 256)"), now=poll.opened + 75)
    text = polls.to_csv([poll])
    lines = text.strip().splitlines()
    assert len(lines) == 1 + len(q.options) and lines[0].startswith("poll,round,question_id,question,option")
    assert lines[0].endswith(",opened,measured_at")
    opened, measured_at = lines[2].split(",")[-2:]
    assert ",2,0.667,3,1.9," in lines[2] and lines[2].endswith(f",True,{opened},{measured_at}")
    assert ",Measured on this engine,True," in lines[2]
    assert measured_at == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(poll.opened + 75))  # when it was measured


def test_the_amdahl_figure_says_it_was_computed():
    from engine.labs.sweeps import SweepPoint, SweepResult
    pts = [SweepPoint("output", 1, 64, 64, 0.1, 0.9, 0.014, 0.014, 1.0, 640.0, 70.0) for _ in range(3)]
    m = polls.EXPERIMENTS["valley_x2"].read(SweepResult("output", [64] * 3, pts), {})
    assert m.how == poll_experiments.COMPUTED and "computed with Amdahl's law" in m.text
    assert m.value == pytest.approx(1 / (0.05 + 0.9))


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


def test_the_room_s_answers_read_as_text_too():
    text = fig_poll.poll_text(["×1", "×2", "×4"], [1, 6, 1], matched=1)
    assert text.splitlines() == ["The room's answers, 8 in all:", "- ×1: **1** (12%)",
                                 "- ×2: **6** (75%) — the measurement's answer", "- ×4: **1** (12%)"]
    assert "0 in all" in fig_poll.poll_text(["a", "b"], [0, 0])


def test_polls_module_stays_streamlit_free():
    code = "import sys, ui.room.polls, ui.figures.fig_poll; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
