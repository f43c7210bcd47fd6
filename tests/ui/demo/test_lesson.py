"""Lesson files: the shipped ones load against the app's own pages and polls; a bad file is skipped with one line
naming the file, the field and why, and the others still load; a step's run is judged against what it asked for."""
import json
import re
import shutil
from types import SimpleNamespace

import pytest

from tests import ROOT
from ui.demo import lesson, links

SHIPPED = sorted((ROOT / "assets" / "lessons").glob("*.json"))
GOOD = {"title": "A small lesson", "steps": [
    {"title": "The bridge", "page": "decode", "minutes": 3,
     "settings": {"example": "chat", "prompt_tokens": 32, "output_tokens": 16, "run": True},
     "say": "One token per step.", "see": "The cache grows.", "do": "Press →.", "if_different": "Run it again."},
    {"title": "A poll", "page": "poll", "poll": "1-double-the-prompt", "minutes": 2},
]}


def _write(folder, name: str, data) -> None:
    (folder / name).write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


def _with(step_change: dict, index: int = 0, **top) -> dict:
    data = json.loads(json.dumps(GOOD))
    data["steps"][index].update(step_change)
    data.update(top)
    return data


def test_the_shipped_lessons_load_against_the_apps_pages_and_polls():
    assert SHIPPED, "assets/lessons/ ships a lesson"
    found, problems = lesson.load_all(pages=lesson.app_pages())
    assert problems == [] and [x.name for x in found] == sorted(p.stem for p in SHIPPED)
    pages = lesson.app_pages()
    for each in found:
        for step in each.steps:
            assert step.page in pages
            if step.poll:
                assert (ROOT / "assets" / "polls" / f"{step.poll}.json").exists() and step.poll_question
            assert step.say and step.see, f"{each.name}: step {step.title!r} tells the teacher what to say and show"


def test_the_45_minute_lesson_takes_45_minutes_and_walks_both_bends():
    the = lesson.load(ROOT / "assets" / "lessons" / "45-minutes.json")
    assert the.minutes == 45
    pages = [s.page for s in the.steps]
    for page in ("home", "prefill", "decode", "poll", "lab_sweeps", "lab_batch", "lab_remedies", "lab_budget"):
        assert page in pages
    presets = [s.settings.get(links.PRESET) for s in the.steps]
    assert "decode" in presets and "prefill" in presets
    assert {"1-double-the-prompt", "2-a-long-prompt"} <= {s.poll for s in the.steps}
    assert all(s.runs for s in the.steps if s.page in ("prefill", "decode")), "the story pages open with a run"


def test_app_pages_reads_the_navigation_of_app_py():
    pages = lesson.app_pages()
    assert pages["home"].startswith("Home") and "decode" in pages and "lab_sweeps" in pages
    assert pages["poll"] == "Predict, then measure"  # an explicit url_path wins over the file's name


@pytest.mark.parametrize("name, data, field, why", [
    ("broken.json", '{"title": "x", "steps": [', "", "not valid JSON (line 1"),
    ("typo.json", _with({"sya": "hello"}), "step 1 sya", "not a field of a step"),
    ("page.json", _with({"page": "nowhere"}), "step 1 page", "'nowhere' is not a page of this dashboard"),
    ("length.json", _with({"settings": {"prompt_tokens": 99999}}), "step 1 settings.prompt_tokens",
     "is not a whole number from 1 to 1024"),
    ("setting.json", _with({"settings": {"colour": "red"}}), "step 1 settings.colour", "not a link setting"),
    ("poll.json", _with({"poll": "9-no-such-poll"}, 1), "step 2 poll", "no assets/polls/9-no-such-poll.json"),
    ("preset.json", _with({"settings": {"preset": "decode"}}), "step 1 settings.preset", "on Home only"),
    ("both.json", _with({"page": "home", "settings": {"preset": "decode", "run": 1}}), "step 1 settings.preset",
     "not both"),
    ("long.json", _with({"say": "word " * 200}), "step 1 say", "at most 600"),
    ("title.json", _with({"title": ""}), "step 1 title", "is required"),
    ("empty.json", {"title": "no steps", "steps": []}, "steps", "a list of 1 to 40 steps"),
    ("list.json", [1, 2], "", "one object"),
    ("minutes.json", _with({"minutes": "five"}), "step 1 minutes", "a number from 0 to 120"),
])
def test_a_bad_file_is_skipped_with_one_line_and_the_others_load(tmp_path, name, data, field, why):
    _write(tmp_path, "good.json", GOOD)
    _write(tmp_path, name, data)
    found, problems = lesson.load_all(tmp_path, pages=lesson.app_pages())
    assert [x.name for x in found] == ["good"]
    assert len(problems) == 1 and "\n" not in problems[0]
    line = problems[0]
    assert line.startswith(f"{name}: {field}") and why in line and line.endswith("skipped"), line


def test_a_file_that_is_not_utf8_or_badly_named_is_one_line_too(tmp_path):
    (tmp_path / "latin.json").write_bytes('{"title": "caf\xe9"}'.encode("latin-1"))
    _write(tmp_path, "bad name.json", GOOD)
    found, problems = lesson.load_all(tmp_path)
    assert found == [] and len(problems) == 2
    assert any("latin.json: not UTF-8 text" in p for p in problems)
    assert any("bad name.json: the file's name must be" in p for p in problems)


def test_settings_are_kept_as_a_link_writes_them(tmp_path):
    _write(tmp_path, "good.json", _with({"settings": {"chat": True, "temperature": 0.5, "run": False}}))
    step = lesson.load(tmp_path / "good.json").steps[0]
    assert step.settings == {"chat": "1", "temperature": "0.5"} and not step.runs  # run: false is no run
    assert step.query() == {"page": "decode", "chat": "1", "temperature": "0.5"}


def test_what_a_step_asks_for_fills_in_the_links_defaults(tmp_path):
    _write(tmp_path, "good.json", _with({"settings": {"run": 1}}))
    step = lesson.load(tmp_path / "good.json").steps[0]
    defaults = links.PARAMS
    assert step.asked() == (defaults["prompt_tokens"].default, defaults["output_tokens"].default, False)
    assert lesson.load(tmp_path / "good.json").steps[1].asked() is None  # a poll step runs nothing
    _write(tmp_path, "typed.json", _with({"settings": {"run": 1, "fit": 0, "output_tokens": 7}}))
    assert lesson.load(tmp_path / "typed.json").steps[0].asked() == (0, 7, False)  # the prompt as typed: not checked


def test_the_lesson_link_names_the_lesson_and_step():
    the = lesson.load(SHIPPED[0])
    query = dict(part.split("=") for part in the.link(3).lstrip("?").split("&"))
    got = links.parse(query, set(), set(), lessons={the.name: len(the.steps)})
    assert (got.lesson, got.step, got.notices) == (the.name, 3, [])


# ----------------------------------------------------------------------------------------------
# Did the step's run produce what it asked for?
# ----------------------------------------------------------------------------------------------
def _trace(n_prompt: int, n_output: int, stop: str = "length"):
    return SimpleNamespace(n_prompt=n_prompt, n_output=n_output, stop_reason=stop)


def test_check_run_as_asked():
    check = lesson.check_run(_trace(128, 64), 128, 64)
    assert check.ok and "as asked" in check.text and "128 → 64" in check.text


def test_check_run_says_why_a_run_stopped_early():
    early = lesson.check_run(_trace(128, 1, "eos"), 128, 64)
    assert not early.ok and "end-of-text" in early.text and "Exact output length" in early.text
    cancelled = lesson.check_run(_trace(128, 9, "cancelled"), 128, 64)
    assert not cancelled.ok and "cancelled after 9" in cancelled.text
    other = lesson.check_run(_trace(100, 64), 128, 64)
    assert not other.ok and "100 prompt tokens" in other.text


def test_check_run_with_the_chat_template_counts_its_tokens_on_top():
    assert lesson.check_run(_trace(158, 64), 128, 64, chat=True).ok
    assert not lesson.check_run(_trace(120, 64), 128, 64, chat=True).ok


def test_the_copy_a_teacher_makes_loads_as_a_lesson_of_its_own(tmp_path):
    shutil.copy(SHIPPED[0], tmp_path / "my-lesson.json")
    found, problems = lesson.load_all(tmp_path, pages=lesson.app_pages())
    assert problems == [] and found[0].name == "my-lesson"


def test_the_shipped_words_follow_the_lessons_physics():
    """The rules tests/test_words.py holds the pages to (docs/lesson-physics.md): no dated measurement, prefill called
    compute-bound only with its ridge, no decode step that costs the same at any context, batching never a remedy
    that makes one request faster."""
    for path in SHIPPED:
        the = lesson.load(path)
        texts = [the.about] + [getattr(s, name) for s in the.steps for name in ("title", *lesson.NOTES)]
        for text in texts:
            assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), text
            assert "at any context" not in text or "same at any context" in text and "weights" in text, text
            for sentence in re.split(r"(?<=[.;:])\s", text):
                low = sentence.lower()
                if "compute-bound" in low and ("prefill" in low or "valley" in low or "prompt" in low):
                    assert "ridge" in low or "long enough" in low, sentence
                if "batch" in low and "faster" in low:
                    assert "not" in low, sentence


def test_the_teacher_guide_walks_the_shipped_lesson_step_by_step():
    guide = (ROOT / "docs" / "teacher-guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("## The lesson"):guide.index("## What the dashboard shows")]
    the = lesson.load(ROOT / "assets" / "lessons" / "45-minutes.json")
    for number, step in enumerate(the.steps, 1):
        assert f"| {number} | {step.minutes:g} |" in section and f"**{step.title}**" in section, step.title
    assert the.link(1) in section and "assets/lessons/README.md" in section and "ui.demo.lesson_sheet" in section
