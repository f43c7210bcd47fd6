"""Lessons: an ordered list of steps a teacher walks through in presenter mode, read from assets/lessons/*.json.

A step is a page and the settings a shareable link carries (ui/demo/links.py: `example`, `prompt_tokens`, `run`,
`preset`, ...), an optional poll from the bank (assets/polls/, by file name) and the teacher's notes: what to say,
what the class should see, what to do, and what to do when this machine's numbers differ. The fields are in
assets/lessons/README.md. A file with a bad field is skipped with one line naming the file, the field and why; the
other lessons still load. `check_run` says whether a step's run produced the lengths it asked for.
Streamlit-free: ui/controls/lesson_panel.py draws the bar, ui/demo/lesson_sheet.py prints the teacher sheet.
"""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ui import state
from ui.demo import links, recorded

ROOT = Path(__file__).resolve().parents[2]
LESSONS_DIR = ROOT / "assets" / "lessons"
POLLS_DIR = ROOT / "assets" / "polls"
APP_FILE = ROOT / "app.py"

MAX_BYTES = 200_000  # a lesson is a few kB of text: anything far larger is not one
MAX_STEPS = 40
MAX_TITLE, MAX_NOTE = 80, 600  # characters: a step's title, each of its notes (the sheet fits one page)
LESSON_FIELDS = ("title", "about", "order", "steps")
STEP_FIELDS = ("title", "page", "minutes", "settings", "poll", "say", "see", "do", "if_different")
NOTES = {"say": "Say", "see": "The class sees", "do": "Do", "if_different": "If this machine's numbers differ"}
# a step's settings: the link's own parameters but presenter mode and the theme (the screen's, not the lesson's)
SETTINGS = tuple(name for name in links.PARAMS if name not in ("present", "theme")) + (links.RUN, links.PRESET, links.TRACE)


class LessonError(ValueError):
    """A lesson file that cannot be used; its message is the one line the teacher reads."""


@dataclass(frozen=True)
class Step:
    title: str
    page: str  # a page's URL path ("home" for Home)
    settings: dict[str, str] = field(default_factory=dict)  # link parameter -> its value as the link writes it
    poll: str = ""  # a poll file's name in assets/polls/ (without .json), or ""
    poll_id: str = ""  # that question's id (what the poll page's choice holds)
    poll_question: str = ""
    minutes: float = 0.0
    say: str = ""
    see: str = ""
    do: str = ""
    if_different: str = ""

    def query(self) -> dict[str, str]:
        """The step as a link's query: its page and settings."""
        return {links.PAGE: self.page, **self.settings}

    @property
    def runs(self) -> bool:
        """True when opening the step runs a request (its own, or a preset's)."""
        return self.settings.get(links.RUN) == "1" or links.PRESET in self.settings

    def asked(self) -> tuple[int, int, bool] | None:
        """(prompt tokens, output tokens, chat template) the step's own run asks for; None when it runs none (or a
        preset, whose lengths come from this machine's measured rates). Unset settings are the link's defaults."""
        if self.settings.get(links.RUN) != "1":
            return None
        value = links.parse(self.settings, set(), recorded.shipped_names()).values
        fit = value.get(state.FIT_PROMPT, links.PARAMS["fit"].default)
        prompt = value.get(state.PROMPT_TOKENS, links.PARAMS["prompt_tokens"].default) if fit else 0
        return (prompt, value.get(state.MAX_NEW_TOKENS, links.PARAMS["output_tokens"].default),
                value.get(state.CHAT, links.PARAMS["chat"].default))


@dataclass(frozen=True)
class Lesson:
    name: str  # the file's name without .json: what a link's ?lesson= names
    title: str
    about: str
    steps: tuple[Step, ...]
    order: float = 0.0

    @property
    def minutes(self) -> float:
        return sum(s.minutes for s in self.steps)

    def link(self, step: int = 1) -> str:
        """The query that opens this lesson at `step` in presenter mode."""
        return f"?{links.LESSON}={self.name}&{links.STEP}={step}&present=1"


# --- Reading and checking a file -----------------------------------------------------------------------------------
def app_pages(app_file: Path = APP_FILE) -> dict[str, str]:
    """Every page of app.py's navigation: URL path -> title (read from its source: st.Page(file, title=...,
    url_path=...); the default page is "home"), so a lesson names only pages the dashboard has."""
    pages = {}
    for node in ast.walk(ast.parse(app_file.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page" and node.args):
            continue
        kw = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        file = node.args[0].value if isinstance(node.args[0], ast.Constant) else ""
        path = links.HOME if kw.get("default") is True else kw.get("url_path") or Path(str(file)).stem
        pages[str(path)] = str(kw.get("title") or path)
    return pages


def _text(data: dict, name: str, limit: int, required: bool = False) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise LessonError(f"{name}: must be text in quotes, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise LessonError(f"{name}: is required and empty")
    if len(value) > limit:
        raise LessonError(f"{name}: {len(value)} characters, at most {limit} (the teacher sheet is one page)")
    return value


def _unknown(data: dict, known: tuple[str, ...], what: str) -> None:
    extra = sorted(set(data) - set(known))
    if extra:
        raise LessonError(f"{extra[0]}: not a field of a {what} (known: {', '.join(known)})")


def _setting_text(name: str, value) -> str:
    """A setting as the link writes it: true/false as 1/0, numbers as digits, text as it is."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)) and not (isinstance(value, float) and not math.isfinite(value)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return value.strip()
    raise LessonError(f"settings.{name}: must be a number, true/false or text, not {type(value).__name__}")


def _settings(raw, page: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise LessonError(f"settings: must be an object of link settings, not {type(raw).__name__}")
    out = {}
    for name, value in raw.items():
        if name not in SETTINGS:
            raise LessonError(f"settings.{name}: not a link setting (known: {', '.join(SETTINGS)})")
        text = _setting_text(name, value)
        link = links.parse({name: text}, set(), recorded.shipped_names())
        if link.notices:
            raise LessonError(f"settings.{name}: {link.notices[0]}")
        out[name] = text
    if links.RUN in out:  # run: false is the same as no run
        if links.FLAGS[out[links.RUN].lower()]:
            out[links.RUN] = "1"
        else:
            out.pop(links.RUN)
    if links.PRESET in out:
        if page != links.HOME:
            raise LessonError(f"settings.preset: Home's presets run on Home only, and this step's page is '{page}'")
        if links.RUN in out:
            raise LessonError("settings.preset: a step runs a preset or its own request (run), not both")
        fixed = [n for n in ("prompt_tokens", "output_tokens") if n in out]
        if fixed:
            raise LessonError(f"settings.{fixed[0]}: a preset chooses the lengths from this machine's rates; "
                              "leave it out")
    return out


def _poll(name, polls_dir: Path) -> tuple[str, str, str]:
    """(file name, question id, question) of a poll of the bank."""
    if not isinstance(name, str) or not links.PLAIN.fullmatch(name.strip().removesuffix(".json")):
        raise LessonError("poll: must be a poll's file name in assets/polls/, e.g. \"1-double-the-prompt\"")
    stem = name.strip().removesuffix(".json")
    path = polls_dir / f"{stem}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        question = data["question"]
        qid = str(data.get("id") or stem)
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in polls_dir.glob("*.json")))
        raise LessonError(f"poll: no assets/polls/{stem}.json (the bank holds: {known})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise LessonError(f"poll: assets/polls/{stem}.json cannot be read as a question ({type(exc).__name__})") from None
    if not isinstance(question, str):
        raise LessonError(f"poll: assets/polls/{stem}.json has no question text")
    return stem, qid, question.strip()


def _step(data, pages, polls_dir: Path) -> Step:
    if not isinstance(data, dict):
        raise LessonError(f"must be an object with a title and a page, not {type(data).__name__}")
    _unknown(data, STEP_FIELDS, "step")
    page = data.get("page")
    if not isinstance(page, str) or not page.strip():
        raise LessonError("page: is required: a page's URL path, e.g. \"decode\" or \"lab_sweeps\" (\"home\" for Home)")
    page = page.strip()
    if pages is not None and page not in pages:
        raise LessonError(f"page: '{page}' is not a page of this dashboard (its pages: {', '.join(sorted(pages))})")
    minutes = data.get("minutes", 0)
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 <= minutes <= 120:
        raise LessonError(f"minutes: must be a number from 0 to 120, not {minutes!r}"[:200])
    poll = _poll(data["poll"], polls_dir) if data.get("poll") else ("", "", "")
    notes = {name: _text(data, name, MAX_NOTE) for name in NOTES}
    return Step(title=_text(data, "title", MAX_TITLE, required=True), page=page,
                settings=_settings(data.get("settings", {}), page), poll=poll[0], poll_id=poll[1],
                poll_question=poll[2], minutes=float(minutes), **notes)


def parse_lesson(data, name: str, pages=None, polls_dir: Path = POLLS_DIR) -> Lesson:
    """A Lesson from a file's JSON value; raises LessonError('field: why', the field as 'step 3 settings.run')."""
    if not isinstance(data, dict):
        raise LessonError(f"the file must hold one object with a title and steps, not {type(data).__name__}")
    _unknown(data, LESSON_FIELDS, "lesson")
    title = _text(data, "title", MAX_TITLE, required=True)
    about = _text(data, "about", MAX_NOTE)
    order = data.get("order", 0)
    if isinstance(order, bool) or not isinstance(order, (int, float)) or not math.isfinite(order):
        raise LessonError(f"order: must be a number, not {order!r}"[:200])
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not 1 <= len(raw_steps) <= MAX_STEPS:
        raise LessonError(f"steps: must be a list of 1 to {MAX_STEPS} steps")
    steps = []
    for i, raw in enumerate(raw_steps, start=1):
        try:
            steps.append(_step(raw, pages, polls_dir))
        except LessonError as exc:
            raise LessonError(f"step {i} {exc}") from None
    return Lesson(name, title, about, tuple(steps), float(order))


def load(path: Path, pages=None, polls_dir: Path = POLLS_DIR) -> Lesson:
    """One lesson file; raises LessonError with one line: the file, the field, why."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise LessonError(f"the file is {path.stat().st_size:,} bytes, at most {MAX_BYTES:,}")
        if not links.PLAIN.fullmatch(path.stem):
            raise LessonError("the file's name must be letters, digits, - or _ (it goes into links as ?lesson=NAME)")
        data = json.loads(path.read_text(encoding="utf-8"))
        return parse_lesson(data, path.stem, pages, polls_dir)
    except json.JSONDecodeError as exc:
        raise LessonError(f"{path.name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise LessonError(f"{path.name}: not UTF-8 text") from None
    except OSError as exc:
        raise LessonError(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except LessonError as exc:
        raise LessonError(f"{path.name}: {str(exc).splitlines()[0]}") from None


def load_all(folder: Path | None = None, pages=None,
             polls_dir: Path = POLLS_DIR) -> tuple[list[Lesson], list[str]]:
    """Every lesson in `folder` (default assets/lessons/), by order then name; and one line per file skipped."""
    lessons, problems = [], []
    for path in sorted(Path(folder or LESSONS_DIR).glob("*.json")):
        try:
            lessons.append(load(path, pages, polls_dir))
        except LessonError as exc:
            problems.append(f"{exc} — skipped")
    return sorted(lessons, key=lambda lesson: (lesson.order, lesson.name)), problems


# --- Did the step's run produce what it asked for? -----------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    ok: bool  # the run wrote the output length asked for (and sent the prompt length asked for)
    text: str  # one line for the teacher: asked, produced, and why it stopped early when it did


def check_run(trace, prompt_tokens: int, output_tokens: int, chat: bool = False) -> Check:
    """Compare a finished run with what a step asked for (prompt_tokens 0: the prompt as typed, not checked)."""
    got_in, got_out = trace.n_prompt, trace.n_output
    sent = f"{got_in:,} → {got_out:,} tokens"
    prompt_ok = not prompt_tokens or got_in == prompt_tokens or (chat and got_in > prompt_tokens)
    asked = f"{prompt_tokens:,}{' + the chat template' if chat else ''} → {output_tokens:,}" if prompt_tokens else \
        f"→ {output_tokens:,}"
    if not prompt_ok:
        return Check(False, f"Asked {asked} tokens; the run sent {got_in:,} prompt tokens: a different request "
                            "(the settings changed since the step opened?)")
    if got_out == output_tokens:
        return Check(True, f"Asked {asked} tokens; the run produced {sent}, as asked.")
    if trace.stop_reason == "eos":
        return Check(False, f"Asked {asked} tokens; the run produced {sent}: the model wrote its end-of-text token "
                            f"after {got_out:,} and stopped, because 'Exact output length' was off. "
                            "Switch it on (or open the step again) to measure the length asked.")
    if trace.stop_reason == "cancelled":
        return Check(False, f"Asked {asked} tokens; the run was cancelled after {got_out:,}.")
    return Check(False, f"Asked {asked} tokens; the run produced {sent} (it stopped: {trace.stop_reason}).")
