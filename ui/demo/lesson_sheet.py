"""The teacher sheet: one printable page made from a lesson file (HTML with print CSS, or Markdown), and its CLI.

    python -m ui.demo.lesson_sheet assets/lessons/45-minutes.json            # HTML on stdout
    python -m ui.demo.lesson_sheet assets/lessons/45-minutes.json --markdown -o sheet.md

A bad file gets one line (`error: FILE: field: why`) and exit status 2, never a traceback. The same sheet downloads
from the lesson bar (ui/controls/lesson_panel.py); the Notes popover shows one step of it. Streamlit-free.
"""
from __future__ import annotations

import argparse
import html as html_lib
import re
import sys
from pathlib import Path

from ui.demo import lesson as lessons_mod
from ui.demo import links

KEYS = "Next: PageDown or the Next button · Back: PageUp"
PRESET_WORDS = {"prefill": "Prefill-heavy", "even": "Close to even", "decode": "Decode-heavy"}


def page_titles() -> dict[str, str]:
    """URL path -> the page's title in app.py's navigation (the path itself where app.py cannot be read)."""
    try:
        return lessons_mod.app_pages()
    except (OSError, SyntaxError):
        return {}


def settings_words(step: lessons_mod.Step) -> str:
    """A step's settings in words: 'chat example · 128 → 64 tokens · runs on opening'."""
    settings = dict(step.settings)
    words = []
    if "example" in settings:
        words.append(f"{settings.pop('example')} example")
    prompt, output = settings.pop("prompt_tokens", None), settings.pop("output_tokens", None)
    if prompt or output:
        words.append(f"{prompt or links.PARAMS['prompt_tokens'].default} → "
                     f"{output or links.PARAMS['output_tokens'].default} tokens")
    labels = {"chat": "chat template", "ignore_eos": "exact output length", "fit": "exactly N prompt tokens"}
    for name, value in settings.items():
        if name == links.PRESET:
            words.append(f"Home's {PRESET_WORDS.get(value, value)} preset (lengths from this machine's rates)")
        elif name == links.RUN:
            words.append("runs on opening")
        elif name in labels:
            words.append(f"{labels[name]} {'on' if links.FLAGS.get(value.lower()) else 'off'}")
        else:
            words.append(f"{name} {value}")
    return " · ".join(words)


def poll_name(file_name: str) -> str:
    """A poll file's name in words: '1-double-the-prompt' -> 'double the prompt'."""
    return re.sub(r"^\d+-", "", file_name).replace("-", " ").replace("_", " ")


def step_markdown(lesson: lessons_mod.Lesson, number: int, titles: dict[str, str] | None = None) -> str:
    """One step's notes as Markdown (the Notes popover). Model text is never inside: only the lesson's own words."""
    titles = page_titles() if titles is None else titles
    step = lesson.steps[number - 1]
    lines = [f"**Step {number} of {len(lesson.steps)} — {step.title}**"
             + (f" ({step.minutes:g} min)" if step.minutes else ""),
             f"*Page:* {titles.get(step.page, step.page)}" + (f" · {settings_words(step)}" if step.settings else "")]
    if step.poll:
        lines.append(f"*Poll:* {step.poll_question} (`{step.poll}`: open it on *Predict, then measure*)")
    lines += [f"*{label}:* {getattr(step, name)}" for name, label in lessons_mod.NOTES.items() if getattr(step, name)]
    return "\n\n".join(lines)


def markdown(lesson: lessons_mod.Lesson) -> str:
    """The whole sheet as Markdown."""
    titles = page_titles()
    head = [f"# {lesson.title} — teacher sheet", "",
            f"{lesson.about}\n" if lesson.about else "",
            f"{lesson.minutes:g} minutes, {len(lesson.steps)} steps. Open `{lesson.link()}` on the dashboard; {KEYS}.",
            ""]
    body = [step_markdown(lesson, i, titles) + "\n" for i in range(1, len(lesson.steps) + 1)]
    return "\n".join(head + body)


CSS = """
@page { size: A4 landscape; margin: 7mm; }
body { font: 7.2pt/1.2 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111; margin: 0; }
h1 { font-size: 12pt; margin: 0 0 2pt 0; }
p.about { margin: 0 0 4pt 0; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { border: 0.5pt solid #999; padding: 1.5pt 3pt; vertical-align: top; text-align: left; }
th { background: #eee; }
tr { break-inside: avoid; }
col.n { width: 2.2%; } col.m { width: 3%; } col.where { width: 18%; } col.say { width: 24%; }
col.see { width: 20%; } col.do { width: 32.8%; }
.poll { font-style: italic; }
code { font-size: 7pt; }
@media screen { body { margin: 1.5em; max-width: 80em; } }
"""


def html(lesson: lessons_mod.Lesson) -> str:
    """The whole sheet as one HTML page, A4 landscape when printed; every text escaped."""
    esc = html_lib.escape
    titles = page_titles()
    rows = []
    for i, step in enumerate(lesson.steps, start=1):
        where = f"<b>{esc(step.title)}</b><br>{esc(titles.get(step.page, step.page))}"
        if step.settings:
            where += f"<br>{esc(settings_words(step))}"
        if step.poll:
            where += f"<br><span class='poll'>Poll: {esc(poll_name(step.poll))}</span>"
        todo = esc(step.do) + (f"<br><b>If different here:</b> {esc(step.if_different)}" if step.if_different else "")
        rows.append(f"<tr><td>{i}</td><td>{step.minutes:g}</td><td>{where}</td>"
                    f"<td>{esc(step.say)}</td><td>{esc(step.see)}</td><td>{todo}</td></tr>")
    about = f"{esc(lesson.about)} " if lesson.about else ""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(lesson.title)} — teacher sheet"
            f"</title><style>{CSS}</style></head><body><h1>{esc(lesson.title)} — teacher sheet</h1>"
            f"<p class='about'>{about}<b>{lesson.minutes:g} minutes, {len(lesson.steps)} steps.</b> Open "
            f"<code>{esc(lesson.link())}</code> on the dashboard; {esc(KEYS)}.</p>"
            "<table><colgroup><col class='n'><col class='m'><col class='where'><col class='say'><col class='see'>"
            "<col class='do'></colgroup>"
            "<tr><th>#</th><th>min</th><th>Step: page, settings, poll</th><th>Say</th><th>The class sees</th>"
            f"<th>Do</th></tr>{''.join(rows)}</table></body></html>")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.demo.lesson_sheet",
                                     description="Print a lesson file's one-page teacher sheet (HTML, or Markdown).")
    parser.add_argument("file", help="a lesson file, e.g. assets/lessons/45-minutes.json")
    parser.add_argument("--markdown", action="store_true", help="Markdown instead of HTML")
    parser.add_argument("-o", "--output", help="write here instead of printing")
    args = parser.parse_args(argv)
    try:
        lesson = lessons_mod.load(Path(args.file), pages=page_titles() or None)
    except lessons_mod.LessonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = markdown(lesson) if args.markdown else html(lesson)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"error: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
