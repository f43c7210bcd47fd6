"""The teacher sheet: every step of the file on one page (HTML with print CSS, or Markdown), text escaped; the CLI
prints it, and a bad file gets one line and exit status 2."""
import json

from tests import ROOT
from ui.demo import lesson, lesson_sheet

SHIPPED = ROOT / "assets" / "lessons" / "45-minutes.json"


def _lesson(tmp_path, say: str = "Say this."):
    data = {"title": "Tiny <lesson>", "about": "About & more", "steps": [
        {"title": "The bridge", "page": "decode", "minutes": 3, "say": say, "see": "The cache grows.",
         "settings": {"example": "chat", "prompt_tokens": 32, "output_tokens": 16, "run": True}},
        {"title": "Home's preset", "page": "home", "minutes": 2, "settings": {"preset": "decode"}},
        {"title": "A poll", "page": "poll", "poll": "1-double-the-prompt"},
    ]}
    (tmp_path / "tiny.json").write_text(json.dumps(data), encoding="utf-8")
    return lesson.load(tmp_path / "tiny.json")


def test_html_holds_every_step_escaped_with_print_css(tmp_path):
    the = _lesson(tmp_path, say="Watch <script>alert(1)</script> the bridge")
    page = lesson_sheet.html(the)
    assert "<script>" not in page and "&lt;script&gt;" in page and "Tiny &lt;lesson&gt;" in page
    assert "@page" in page and "A4 landscape" in page
    for step in the.steps:
        assert step.title.replace("'", "&#x27;") in page
    assert "Decode — the bridge" in page  # the page's title from app.py, not its URL path
    assert "chat example · 32 → 16 tokens · runs on opening" in page
    assert "Decode-heavy preset" in page and "Poll: double the prompt" in page
    assert "?lesson=tiny&amp;step=1&amp;present=1" in page
    assert "5 minutes, 3 steps" in page


def test_markdown_and_one_steps_notes(tmp_path):
    the = _lesson(tmp_path)
    text = lesson_sheet.markdown(the)
    assert text.startswith("# Tiny <lesson> — teacher sheet")
    assert text.count("**Step ") == 3 and "*Say:* Say this." in text
    one = lesson_sheet.step_markdown(the, 3)
    assert one.startswith("**Step 3 of 3 — A poll**") and "1-double-the-prompt" in one and "Say" not in one


def test_cli_prints_the_sheet(capsys):
    assert lesson_sheet.main([str(SHIPPED), "--markdown"]) == 0
    out = capsys.readouterr().out
    the = lesson.load(SHIPPED)
    assert all(step.title in out for step in the.steps)


def test_cli_writes_a_file(tmp_path):
    target = tmp_path / "sheet.html"
    assert lesson_sheet.main([str(SHIPPED), "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_cli_a_bad_file_is_one_line_and_status_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"title": "x", "steps": [{"title": "y", "page": "decode", "settings": {"run": "soon"}}]}')
    assert lesson_sheet.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: bad.json: step 1 settings.run: run 'soon' is not 1 or 0")
    assert lesson_sheet.main([str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot be read" in capsys.readouterr().err
