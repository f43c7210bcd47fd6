"""Lesson mode in the whole app (AppTest, tiny model): a link opens a step (its page, settings and run), Back / Next
move through the steps with the step in the URL, a reload lands on the same step, a bad file or link is one line."""
import json
import shutil

import pytest

from tests import ROOT
from ui import state
from ui.demo import lesson

LESSON = "45-minutes"
SHIPPED = lesson.load(ROOT / "assets" / "lessons" / f"{LESSON}.json")
DECODE_STEP = next(i for i, s in enumerate(SHIPPED.steps, 1) if s.page == "decode")  # a run that fits the tiny model


def _bar(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith(f"**{SHIPPED.title}**"))


def test_a_lesson_link_opens_its_step_runs_it_and_says_it_produced_what_it_asked(make_app):
    at = make_app(query={"lesson": LESSON, "step": str(DECODE_STEP), "present": "1"}).run()
    assert not at.exception and not at.error
    step = SHIPPED.steps[DECODE_STEP - 1]
    assert f"step **{DECODE_STEP} of {len(SHIPPED.steps)}**: {step.title}" in _bar(at)
    assert at.title[0].value.startswith("Decode")
    trace = at.session_state[state.STORE].last_trace
    prompt, output, chat = step.asked()
    assert trace.n_output == output and (trace.n_prompt > prompt if chat else trace.n_prompt == prompt)
    assert any(s.value.startswith("This step: ") and "as asked" in s.value for s in at.success)
    query = dict(at.query_params)
    assert query["lesson"] == LESSON and query["step"] == str(DECODE_STEP) and query["page"] == "decode"


@pytest.mark.parametrize("verdict", ["decode", "prefill"])
def test_a_preset_step_presses_the_preset_once_and_judges_its_lengths(make_app, verdict):
    number = next(i for i, s in enumerate(SHIPPED.steps, 1) if s.settings.get("preset") == verdict)
    at = make_app(query={"lesson": LESSON, "step": str(number), "present": "1"}).run()
    assert not at.exception and not at.error
    preset = at.session_state[state.PRESET_APPLIED]
    trace = at.session_state[state.STORE].last_trace
    assert preset.verdict == verdict and (trace.n_prompt, trace.n_output) == (preset.prompt_tokens, preset.output_tokens)
    assert any(s.value.startswith("This step: ") and "as asked" in s.value for s in at.success)
    assert dict(at.query_params)["preset"] == verdict
    at.run()
    assert len(at.session_state[state.STORE].history) == 1  # pressed once, not at every rerun


def test_next_and_back_move_through_the_steps_from_the_defaults(make_app):
    at = make_app(query={"lesson": LESSON, "step": str(DECODE_STEP), "present": "1"}).run()
    at.session_state[state.TEMPERATURE] = 0.7  # the teacher changed something during the step
    at.button(key=state.LESSON_NEXT).click().run()
    assert not at.exception
    nxt = SHIPPED.steps[DECODE_STEP]
    assert f"step **{DECODE_STEP + 1} of" in _bar(at) and dict(at.query_params)["step"] == str(DECODE_STEP + 1)
    assert dict(at.query_params)["page"] == nxt.page
    assert at.session_state[state.TEMPERATURE] == 0.0  # a step starts from the defaults
    assert at.session_state[state.PRESENTER] and at.session_state[state.MODEL] == "tiny-llama"  # the screen's own
    if nxt.poll:
        assert at.session_state[state.POLL_PICK] == nxt.poll_id  # the poll page opens on the step's question
    at.button(key=state.LESSON_BACK).click().run()
    assert not at.exception and f"step **{DECODE_STEP} of" in _bar(at)
    assert at.title[0].value.startswith("Decode") and dict(at.query_params)["run"] == "1"
    assert len(at.session_state[state.STORE].history) == 2  # coming back runs the step's request again


def test_a_reload_lands_on_the_same_step(make_app):
    at = make_app(query={"lesson": LESSON, "step": str(DECODE_STEP), "present": "1"}).run()
    at.button(key=state.LESSON_NEXT).click().run()
    query = dict(at.query_params)
    again = make_app(query=query).run()  # F5: a new session with the same address
    assert not again.exception and f"step **{DECODE_STEP + 1} of" in _bar(again)
    assert dict(again.query_params) == query


def test_the_first_and_last_steps_disable_back_and_next(make_app):
    first = make_app(query={"lesson": LESSON, "step": str(len(SHIPPED.steps)), "present": "1"}).run()
    assert first.button(key=state.LESSON_NEXT).disabled and not first.button(key=state.LESSON_BACK).disabled
    assert not first.exception


def test_end_lesson_leaves_the_url_too(make_app):
    at = make_app(query={"lesson": LESSON, "step": str(DECODE_STEP), "present": "1"}).run()
    at.button(key=state.LESSON_END).click().run()
    assert not at.exception and "lesson" not in dict(at.query_params) and "step" not in dict(at.query_params)
    assert not any(m.value.startswith(f"**{SHIPPED.title}**") for m in at.markdown)


def test_the_keys_script_presses_next_and_back(make_app):
    at = make_app(query={"lesson": LESSON, "step": "5", "present": "1"}).run()
    script = " ".join(str(h.proto.body) for h in at.get("html") if "lesson_next" in str(h.proto.body))
    assert "PageDown" in script and "PageUp" in script and "lesson_back" in script


def test_a_bad_lesson_link_is_one_notice(make_app):
    at = make_app(query={"lesson": "nope", "step": "2", "page": "decode"}).run()
    assert not at.exception and at.title[0].value.startswith("Decode")
    notice = " ".join(w.value for w in at.warning)
    assert "lesson 'nope' is not one of the lessons in assets/lessons/" in notice and LESSON in notice
    assert "lesson" not in dict(at.query_params)


def test_start_from_the_sidebar_opens_step_one_in_presenter_mode(make_app):
    at = make_app().run()
    assert at.sidebar.selectbox(key=state.LESSON_PICK).value == LESSON
    at.sidebar.button(key=state.LESSON_START).click().run()
    assert not at.exception and at.session_state[state.PRESENTER]
    assert "step **1 of" in _bar(at) and dict(at.query_params)["step"] == "1"


def test_a_bad_lesson_file_is_one_line_in_the_sidebar_and_the_others_load(make_app, tmp_path, monkeypatch):
    shutil.copy(ROOT / "assets" / "lessons" / f"{LESSON}.json", tmp_path)
    data = json.loads((tmp_path / f"{LESSON}.json").read_text())
    data["steps"][1]["settings"] = {"output_tokens": "lots"}
    (tmp_path / "broken.json").write_text(json.dumps(data))
    monkeypatch.setattr(lesson, "LESSONS_DIR", tmp_path)
    at = make_app().run()
    assert not at.exception
    lines = [w.value for w in at.sidebar.warning if "Lesson file skipped" in w.value]
    assert len(lines) == 1 and "broken.json: step 2 settings.output_tokens" in lines[0]
    assert at.sidebar.selectbox(key=state.LESSON_PICK).options == [
        f"{SHIPPED.title} ({SHIPPED.minutes:g} min, {len(SHIPPED.steps)} steps)"]


def test_in_replay_only_mode_a_step_says_what_it_cannot_do(make_app, monkeypatch):
    monkeypatch.setenv("TWO_BENDS_REPLAY", "1")
    at = make_app(query={"lesson": LESSON, "step": str(DECODE_STEP), "present": "1"}).run()
    assert not at.exception
    assert any("run=1 cannot start a run" in w.value and "replay" in w.value for w in at.warning)
    lab = next(i for i, s in enumerate(SHIPPED.steps, 1) if s.page.startswith("lab_"))
    at.session_state[state.LESSON_STEP] = lab - 1  # the step before the first lab
    at.run()
    at.button(key=state.LESSON_NEXT).click().run()
    assert not at.exception and f"step **{lab} of" in _bar(at)
    assert any("cannot be shown here: replay-only mode has no labs" in w.value for w in at.warning)
