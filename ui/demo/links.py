"""Shareable links: the dashboard's settings as URL query parameters, and back, checked value by value.

An instructor sends `...?page=decode&example=chat&prompt_tokens=128&output_tokens=64&present=1&theme=dark` and the
class opens the same page, prompt, settings and look (or `?trace=long-prompt-short-answer` for a recorded run); `run=1`
also runs the request once on opening (a prepared link is a prepared slide), never in replay-only mode; `preset=decode`
(or prefill, even) presses Home's one-click preset once on opening; `lesson=45-minutes&step=3` opens a lesson's step
(ui/demo/lesson.py). `ignore_eos=1` (the default) makes every run write exactly the output length asked for, past the
model's end-of-text token if it comes sooner, as vLLM's benchmarks do.
`parse` never raises: a value it cannot use falls back to the default and is named in a short notice.
Streamlit-free; ui/controls/demo_panel.py applies the result to the session and keeps the URL up to date.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ui import state
from ui.text import prompts


@dataclass(frozen=True)
class Param:
    """One query parameter: the session-state key it fills, its kind and allowed range, its default."""
    key: str
    kind: str  # "int", "float", "flag", "example" or "theme" (light/dark, held as a flag: dark on)
    default: object
    low: float = 0
    high: float = 0
    step: float = 0  # floats are snapped to the slider's step


# the sidebar's defaults (ui/controls/widgets.py) and ranges, by parameter name in the URL
PARAMS = {
    "example": Param(state.EXAMPLE, "example", "summarisation"),
    "prompt_tokens": Param(state.PROMPT_TOKENS, "int", 64, 1, prompts.PROMPT_TOKENS_MAX),
    "fit": Param(state.FIT_PROMPT, "flag", True),
    "output_tokens": Param(state.MAX_NEW_TOKENS, "int", 32, 1, prompts.OUTPUT_TOKENS_MAX),
    "ignore_eos": Param(state.IGNORE_EOS, "flag", True),  # exactly output_tokens, past an end-of-text token
    "chat": Param(state.CHAT, "flag", False),
    "temperature": Param(state.TEMPERATURE, "float", 0.0, 0.0, 2.0, 0.05),
    "top_k": Param(state.TOP_K, "int", 0, 0, 50_000),
    "top_p": Param(state.TOP_P, "float", 1.0, 0.05, 1.0, 0.05),
    "seed": Param(state.SEED, "int", 0, 0, 2**31 - 1),
    "present": Param(state.PRESENTER, "flag", False),
    "theme": Param(state.DARK_THEME, "theme", False),  # theme=dark: the dark theme (ui/controls/theme_toggle.py)
}
THEMES = {"light": False, "dark": True}
RUN = "run"  # run the request once when the link is opened (ui/controls/run_panel.py starts it)
PRESET = "preset"  # press one of Home's one-click presets once when the link is opened (ui/controls/preset_buttons.py)
PRESETS = ("prefill", "even", "decode")  # ui/text/preset_lengths.py's verdicts
LESSON, STEP = "lesson", "step"  # a lesson's file name (assets/lessons/) and its step, from 1 (ui/demo/lesson.py)
PAGE, TRACE = "page", "trace"  # the page (its URL path) and a shipped recorded run (its file name)
HOME = "home"  # the default page has an empty URL path; the link names it
FLAGS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}
PLAIN = re.compile(r"[A-Za-z0-9_-]{1,80}")


@dataclass
class LinkSettings:
    """What a URL asked for: session-state values to set, a page and recorded run to open, and refusals."""
    values: dict = field(default_factory=dict)  # session-state key -> value
    page: str | None = None  # a URL path among the app's pages (HOME for the default page)
    trace: str | None = None  # a shipped recording's name
    run: bool = False  # run the request once, on opening
    preset: str | None = None  # a verdict of PRESETS: its one-click preset, pressed once on opening
    lesson: str | None = None  # a lesson's name (its file name without .json)
    step: int | None = None  # the lesson's step, from 1 (None: no step named, or no lesson)
    notices: list[str] = field(default_factory=list)

    def notice(self) -> str:
        """One short line for the page, or '' when everything in the link was usable."""
        if not self.notices:
            return ""
        return "Some settings in this link could not be used and were left at their defaults: " + "; ".join(self.notices) + "."


def _shown(raw: str) -> str:
    """A refused value, quoted and cut short, with only harmless characters (it goes into Markdown)."""
    cleaned = "".join(ch if ch.isalnum() or ch in " .,-+" else "?" for ch in raw[:24])
    return f"'{cleaned}{'…' if len(raw) > 24 else ''}'"


def _value(name: str, param: Param, raw: str):
    """The usable value of one parameter, or raise ValueError with the reason."""
    text = raw.strip()
    if param.kind == "flag":
        if text.lower() not in FLAGS:
            raise ValueError(f"{name} {_shown(raw)} is not 1 or 0")
        return FLAGS[text.lower()]
    if param.kind == "theme":
        if text.lower() not in THEMES:
            raise ValueError(f"theme {_shown(raw)} is not light or dark")
        return THEMES[text.lower()]
    if param.kind == "example":
        keys = [ex.key for ex in prompts.examples()]
        if text not in keys:
            raise ValueError(f"example {_shown(raw)} is not one of {', '.join(keys)}")
        return text
    if param.kind == "int":
        if not re.fullmatch(r"[+]?\d{1,12}", text) or not param.low <= int(text) <= param.high:
            raise ValueError(f"{name} {_shown(raw)} is not a whole number from {param.low:g} to {param.high:g}")
        return int(text)
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or not param.low <= number <= param.high:
        raise ValueError(f"{name} {_shown(raw)} is not a number from {param.low:g} to {param.high:g}")
    snapped = param.low + round((number - param.low) / param.step) * param.step
    return round(min(max(snapped, param.low), param.high), 4)


def page_path(page) -> str:
    """A Streamlit page's name in a link: its URL path, HOME for the default page."""
    return page.url_path or HOME


def parse(query: dict, pages: set[str], traces: set[str], replay_only: bool = False,
          lessons: dict[str, int] | None = None) -> LinkSettings:
    """Read `query` (name -> text, as st.query_params.to_dict() gives it); unknown names are ignored.
    `replay_only`: the dashboard has no model (recorded runs only), so `run=1` and `preset` are refused with the
    reason. `lessons`: the lessons that loaded (name -> number of steps), for `lesson` and `step`."""
    out = LinkSettings()
    for name, param in PARAMS.items():
        if name not in query:
            continue
        try:
            out.values[param.key] = _value(name, param, str(query[name]))
        except ValueError as exc:
            out.notices.append(str(exc))
    if PAGE in query:
        page = str(query[PAGE]).strip()
        if page in pages:
            out.page = page
        else:
            out.notices.append(f"page {_shown(page)} is not a page of this dashboard")
    if TRACE in query:
        name = str(query[TRACE]).strip()
        if PLAIN.fullmatch(name) and name in traces:
            out.trace = name
        else:
            out.notices.append(f"trace {_shown(name)} is not one of the recorded runs shipped with the dashboard")
    if RUN in query:
        raw = str(query[RUN])
        if raw.strip().lower() not in FLAGS:
            out.notices.append(f"run {_shown(raw)} is not 1 or 0")
        elif FLAGS[raw.strip().lower()] and replay_only:
            out.notices.append("run=1 cannot start a run: this dashboard shows recorded runs only (replay mode), "
                               "no model is loaded")
        elif FLAGS[raw.strip().lower()] and out.trace:
            out.notices.append("run=1 was not used: the link opens a recorded run, and a new run would replace it")
        else:
            out.run = FLAGS[raw.strip().lower()]
    if PRESET in query:
        raw = str(query[PRESET]).strip().lower()
        if raw not in PRESETS:
            out.notices.append(f"preset {_shown(raw)} is not one of {', '.join(PRESETS)}")
        elif replay_only:
            out.notices.append("preset cannot start a run: this dashboard shows recorded runs only (replay mode)")
        elif out.trace:
            out.notices.append("preset was not used: the link opens a recorded run, and a new run would replace it")
        else:
            out.preset = raw
    _parse_lesson(query, lessons or {}, out)
    return out


def _parse_lesson(query: dict, lessons: dict[str, int], out: LinkSettings) -> None:
    """`lesson` (a loaded lesson's name) and `step` (1 to its number of steps; 1 when left out or unusable)."""
    if LESSON not in query:
        if STEP in query:
            out.notices.append("step was not used: the link names no lesson")
        return
    name = str(query[LESSON]).strip()
    if not (PLAIN.fullmatch(name) and name in lessons):
        known = ", ".join(sorted(lessons)) or "none loaded"
        out.notices.append(f"lesson {_shown(name)} is not one of the lessons in assets/lessons/ ({known})")
        return
    out.lesson, out.step = name, 1
    if STEP in query:
        raw = str(query[STEP]).strip()
        if re.fullmatch(r"\d{1,4}", raw) and 1 <= int(raw) <= lessons[name]:
            out.step = int(raw)
        else:
            out.notices.append(f"step {_shown(raw)} is not a step of the lesson {name} (1 to {lessons[name]}): "
                               "it opens at step 1")


def build(values: dict, page: str | None = None, trace: str | None = None, run: bool = False,
          preset: str | None = None, lesson: str | None = None, step: int | None = None) -> dict[str, str]:
    """Query parameters for the current settings (`values`: session-state key -> value); defaults are left out.
    `run`, `preset`: keep `run=1`, `preset=...` (the session was opened by a link that runs on opening);
    `lesson`, `step`: the lesson step being taught."""
    query: dict[str, str] = {}
    if page:
        query[PAGE] = page
    for name, param in PARAMS.items():
        if param.key not in values:
            continue
        value = values[param.key]
        if value is None or value == param.default:
            continue
        if param.kind == "flag":
            query[name] = "1" if value else "0"
        elif param.kind == "theme":
            query[name] = "dark" if value else "light"
        elif param.kind == "float":
            query[name] = f"{float(value):g}"
        else:
            query[name] = str(value)
    if trace:
        query[TRACE] = trace
    if run:
        query[RUN] = "1"
    if preset:
        query[PRESET] = preset
    if lesson:
        query[LESSON] = lesson
        query[STEP] = str(step or 1)
    return query
