"""Every link and lesson step the product ships produces what it promises, with the real SmolLM2 (AppTest).

The links are read from the README, docs/, assets/**/README.md and ui/demo/links.py (every `?...` query naming a
page, a run, a preset or a lesson); each is opened as a prepared slide (`run=1` added) and its run must write the
output length it asks for (and send the prompt length), or the page must say plainly why it stopped early. Every
lesson step that runs its own request must end with the bar's line saying it produced what it asked for (the
45-minute lesson's steps: in Chromium, tests/browser/test_lesson.py). A request is run once: a docs link asking what
a lesson step asks is checked by that step. The presets (Home's buttons, and
the lesson steps that press one) with the real model: tests/pages/story/test_presets.py and the browser test
tests/browser/test_lesson.py; their lesson plumbing with the tiny model: tests/ui/controls/test_lesson_panel.py.
The docs' slide link once gave 128 -> 1 tokens: SmolLM2-Instruct writes its end-of-text at once on that prompt
without the chat template.
"""
import re

import pytest
from streamlit.testing.v1 import AppTest

from engine.loading.model_store import DEFAULT_MODEL
from tests import ROOT, navigation_only
from tests.pages.story.test_home_timing import APP
from ui import state
from ui.demo import lesson, links, output_length

QUERY = re.compile(r"\?((?:[a-z_]+=[A-Za-z0-9_.\-]*&)*[a-z_]+=[A-Za-z0-9_.\-]*)")
ACTIONS = ("page", "run", "preset", "lesson", "trace")  # a query naming one of these is a link somebody can open
SCREEN = ("page", "present", "theme", "run")  # how a request is shown, not what it asks the model
LESSONS = {x.name: x for x in lesson.load_all()[0]}
# the lessons tests/browser/test_lesson.py walks step by step in Chromium, on the same real model, checking each run's
# "as asked" line: their steps are not run a second time here
WALKED_IN_BROWSER = {"45-minutes"}


def shipped_links() -> list[str]:
    """Every distinct link query in the README, the docs, the assets' READMEs and links.py's docstring (an empty
    value, or one in capitals such as NAME, is a placeholder: not a link)."""
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "assets").rglob("*.md")),
               ROOT / "ui" / "demo" / "links.py"]
    found = []
    for path in sources:
        for match in QUERY.finditer(path.read_text(encoding="utf-8")):
            query = _query(match.group(1))
            placeholder = any(not v or re.fullmatch(r"[A-Z]+", v) for v in query.values())
            if any(name in query for name in ACTIONS) and not placeholder and match.group(1) not in found:
                found.append(match.group(1))
    return found


def _query(link: str) -> dict:
    return dict(part.split("=", 1) for part in link.split("&"))


def _request(query: dict) -> tuple:
    """What a link asks the model (a lesson link: its step's settings under the link's own)."""
    if "lesson" in query:
        query = {**LESSONS[query["lesson"]].steps[int(query.get("step", "1")) - 1].settings, **query}
        query = {k: v for k, v in query.items() if k not in ("lesson", "step")}
    return tuple(sorted((k, v) for k, v in query.items() if k not in SCREEN))


def cases() -> list:
    """One case per distinct request: every lesson step that runs its own request, then every shipped link."""
    out, seen = [], set()
    for name, x in LESSONS.items():
        for i, step in enumerate(x.steps if name not in WALKED_IN_BROWSER else (), 1):
            if step.asked() is not None and _request({"lesson": name, "step": str(i)}) not in seen:
                seen.add(_request({"lesson": name, "step": str(i)}))
                out.append(pytest.param({"lesson": name, "step": str(i), "present": "1"}, id=f"{name}-step-{i}"))
    for link in shipped_links():
        query = _query(link)
        if "lesson" in query and "preset" in dict(_request(query)):
            continue  # a step that presses a preset: see the module's docstring
        if _request(query) not in seen:
            seen.add(_request(_query(link)))
            out.append(pytest.param(_query(link), id=link))
    return out


CASES = cases()


def test_the_docs_slide_link_is_checked():
    slide = _request(_query("page=decode&example=chat&prompt_tokens=128&output_tokens=64&present=1"))
    assert "page=decode&example=chat&prompt_tokens=128&output_tokens=64&present=1" in shipped_links()
    assert slide in {_request(case.values[0]) for case in CASES}


@pytest.fixture
def open_link(monkeypatch):
    navigation_only(monkeypatch)

    def opened(query: dict) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=600)
        at.session_state[state.MODEL] = DEFAULT_MODEL
        at.query_params.update(query)
        return at.run()

    return opened


def _asked(query: dict) -> tuple[int | None, int]:
    """(prompt tokens, output tokens) the link asks for: its own, else the sidebar's defaults."""
    fit = links.FLAGS.get(query.get("fit", "1").lower(), True)
    prompt = int(query.get("prompt_tokens", links.PARAMS["prompt_tokens"].default)) if fit else None
    return prompt, int(query.get("output_tokens", links.PARAMS["output_tokens"].default))


@pytest.mark.parametrize("query", CASES)
def test_every_shipped_link_and_lesson_step_runs_what_it_promises(open_link, query):
    if "lesson" in query:
        return _check_lesson_step(open_link(query), query["lesson"], int(query.get("step", "1")))
    recording = "trace" in query
    at = open_link(query if recording or "preset" in query else {**query, "run": "1"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [w.value for w in at.warning if "could not be used" in w.value], "every setting in the link is usable"
    trace = at.session_state[state.STORE].last_trace
    assert trace is not None
    if recording:
        assert at.session_state[state.TRACE_SHOWN] == query["trace"]
        return
    if "preset" in query:  # Home's preset: the lengths it chose from this machine's rates, all of them written
        preset = at.session_state[state.PRESET_APPLIED]
        assert (trace.n_prompt, trace.n_output) == (preset.prompt_tokens, preset.output_tokens)
        return
    prompt, output = _asked(query)
    if prompt is not None and not links.FLAGS.get(query.get("chat", "0").lower()):
        assert trace.n_prompt == prompt
    if trace.n_output != output:  # only where the page says plainly why
        assert any(i.value == output_length.early_end(trace) for i in at.info), (trace.n_output, output)
    assert trace.n_output == output, f"asked {output} tokens, got {trace.n_output} ({trace.stop_reason})"


def _check_lesson_step(at: AppTest, name: str, number: int) -> None:
    assert not at.exception and not at.error, [e.value for e in at.error]
    step = LESSONS[name].steps[number - 1]
    if step.asked() is None:
        return  # a step without its own run (a preset's: see the module's docstring)
    lines = [s.value for s in at.success if s.value.startswith("This step: ")]
    assert lines and "as asked" in lines[0], [w.value for w in at.warning]
    trace = at.session_state[state.STORE].last_trace
    assert trace.n_output == step.asked()[1]


def test_a_link_that_lets_the_model_stop_says_so_plainly(open_link):
    """The slide link with the exact output length off: the model's end-of-text ends the run (one token here), and
    the story page says so in presenter mode too (an alert, not a caption)."""
    at = open_link({"page": "decode", "example": "chat", "prompt_tokens": "128", "output_tokens": "64",
                    "present": "1", "run": "1", "ignore_eos": "0"})
    assert not at.exception
    trace = at.session_state[state.STORE].last_trace
    assert trace.stop_reason == "eos" and trace.n_output < 64
    said = [i.value for i in at.info if "The model ended its answer" in i.value]
    assert said and f"after {trace.n_output} of the 64 tokens" in said[0] and "Exact output length" in said[0]
