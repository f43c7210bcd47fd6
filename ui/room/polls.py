"""Predict, then measure: the room commits to an answer before the engine gives its own (peer instruction, Mazur 1997).

Streamlit-free and thread-safe. Questions are plain JSON files in assets/polls/ (one question per file, fields in
QUESTION_FIELDS; a file with bad fields is skipped with one clear line, the rest load). A question names an
experiment from EXPERIMENTS: a registered lab job (engine/serving/scheduling/lab_jobs.py) and how its result
becomes one measured figure, matched to the nearest option. A Poll holds one answer per browser session, changeable
until the teacher closes it; `to_csv` exports the room's answers beside what was measured.
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ui.room.poll_experiments import EXPERIMENTS, Experiment, Measured, PollError  # noqa: F401 (polls' API)

BANK_DIR = Path(__file__).resolve().parents[2] / "assets" / "polls"
QUESTION_FIELDS = {  # the fields of a question file, documented for teachers (README, assets/polls/README.md)
    "id": "short name (default: the file's name)",
    "question": "the question as the room reads it (required)",
    "options": "2 to 8 answers: text, or {'label': text, 'value': number} / {'label': text, 'key': word}",
    "measure": "{'experiment': one of EXPERIMENTS, its numbers...}: what Measure runs (leave out: no measurement)",
    "explain": "what the fable says, shown once measured (optional)",
    "order": "where it sits in the list (optional number)",
}
MIN_OPTIONS, MAX_OPTIONS, MAX_TEXT = 2, 8, 400
MEASURE_STALE_S = 900.0  # a measurement left running this long (its tab gone) no longer blocks a new one


# --- questions -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    label: str
    value: float | None = None  # the predicted figure this answer stands for
    key: str = ""  # a categorical answer's name


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    options: tuple[Option, ...]
    measure: dict | None = None  # {"experiment": name, **params}
    explain: str = ""
    order: float = 100.0

    @property
    def experiment(self) -> Experiment | None:
        return EXPERIMENTS[self.measure["experiment"]] if self.measure else None

    def match(self, measured: Measured) -> int | None:
        """The option the measurement answers: the one with its key, or the nearest value (on a log scale)."""
        if measured.key:
            return next((i for i, o in enumerate(self.options) if o.key == measured.key), None)
        valued = [(i, o.value) for i, o in enumerate(self.options) if o.value is not None and o.value > 0]
        if measured.value is None or not measured.value > 0 or not valued:
            return None
        return min(valued, key=lambda iv: abs(math.log(iv[1] / measured.value)))[0]

    def to_json(self) -> str:
        opts = [{k: v for k, v in vars(o).items() if v not in (None, "")} for o in self.options]
        data = dict(id=self.id, question=self.question, options=opts, measure=self.measure, explain=self.explain)
        return json.dumps({k: v for k, v in data.items() if v not in (None, "")}, indent=2, ensure_ascii=False)


def _text(data: dict, name: str, required: bool = False) -> str:
    value = data.get(name, "")
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > MAX_TEXT:
        raise PollError(f"'{name}' must be text of 1 to {MAX_TEXT} characters")
    return value.strip()


def _option(raw) -> Option:
    if isinstance(raw, str):
        raw = {"label": raw}
    if not isinstance(raw, dict) or set(raw) - {"label", "value", "key"}:
        raise PollError("each option must be text or {'label', 'value', 'key'}")
    label = _text(raw, "label", required=True)
    value = raw.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise PollError(f"option '{label}': 'value' must be a positive number")
    key = raw.get("key", "")
    if not isinstance(key, str):
        raise PollError(f"option '{label}': 'key' must be a word")
    return Option(label, float(value) if value is not None else None, key)


def _measure(raw) -> dict | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("experiment") not in EXPERIMENTS:
        raise PollError(f"'measure' needs 'experiment': one of {', '.join(EXPERIMENTS)}")
    exp = EXPERIMENTS[raw["experiment"]]
    for name, value in raw.items():
        if name == "experiment":
            continue
        if name not in exp.params:
            raise PollError(f"experiment '{exp.name}' has no '{name}' (its numbers: {', '.join(exp.params)})")
        _, lo, hi = exp.params[name]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise PollError(f"experiment '{exp.name}': '{name}' must be a whole number from {lo} to {hi}")
    return dict(raw)


def parse_question(data, default_id: str = "question") -> Question:
    """A Question from a file's JSON; PollError (one line) on any bad or unknown field."""
    if not isinstance(data, dict):
        raise PollError("a question file holds one JSON object")
    unknown = set(data) - set(QUESTION_FIELDS)
    if unknown:
        raise PollError(f"unknown field(s) {', '.join(sorted(unknown))} (fields: {', '.join(QUESTION_FIELDS)})")
    options = data.get("options")
    if not isinstance(options, list) or not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise PollError(f"'options' must be a list of {MIN_OPTIONS} to {MAX_OPTIONS} answers")
    order = data.get("order", 100)
    if isinstance(order, bool) or not isinstance(order, (int, float)):
        raise PollError("'order' must be a number")
    qid = data.get("id", default_id)
    if not isinstance(qid, str) or not re.fullmatch(r"[\w.-]{1,60}", qid):
        raise PollError("'id' must be a short name (letters, digits, - _ .)")
    opts = tuple(_option(o) for o in options)
    if len({o.label for o in opts}) != len(opts):
        raise PollError("two options have the same label")
    return Question(qid, _text(data, "question", required=True), opts, _measure(data.get("measure")),
                    _text(data, "explain"), float(order))


def load_bank(folder: Path | None = None) -> tuple[list[Question], list[str]]:
    """Every question file in `folder` (default BANK_DIR), sorted by order; and one line per file that was skipped."""
    questions, problems, seen = [], [], set()
    for path in sorted(Path(folder or BANK_DIR).glob("*.json")):
        try:
            q = parse_question(json.loads(path.read_text(encoding="utf-8")), path.stem)
            if q.id in seen:
                raise PollError(f"id '{q.id}' is already used by another file")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, PollError) as exc:
            problems.append(f"{path.name}: {str(exc).splitlines()[0]} — skipped")
            continue
        seen.add(q.id)
        questions.append(q)
    return sorted(questions, key=lambda q: (q.order, q.id)), problems


def written_question(text: str, option_lines: str, experiment: str = "", params: dict | None = None) -> Question:
    """A question the teacher typed: options one per line; a number in a line ('×2', '4x') is its value."""
    options = []
    for line in (s.strip() for s in option_lines.splitlines()):
        if line:
            num = re.search(r"\d+(?:\.\d+)?", line)
            options.append({"label": line, **({"value": float(num.group())} if num and float(num.group()) > 0 else {})})
    measure = {"experiment": experiment, **(params or {})} if experiment else None
    if measure and experiment == "kv_cache_bridge":
        raise PollError("the KV-cache experiment answers the bank's remedy question only (its options have keys)")
    return parse_question(dict(id="written", question=text, options=options, **({"measure": measure} if measure else {})))


# --- the poll: one question the room answers -----------------------------------------------------------------
_serials = itertools.count(1)


@dataclass
class Poll:
    question: Question
    serial: int = field(default_factory=lambda: next(_serials))  # a new poll gets new widget keys
    answers: dict[str, int] = field(default_factory=dict)  # session id -> option index (one per session)
    open: bool = True  # answers may still change
    measured: Measured | None = None
    measuring_since: float | None = None
    opened: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def answer(self, session_id: str, index: int) -> None:
        with self.lock:
            if not self.open:
                raise PollError("The poll is closed: answers no longer change.")
            if not isinstance(index, int) or not 0 <= index < len(self.question.options):
                raise PollError("That answer is not one of this question's options.")
            self.answers[session_id] = index

    def answer_of(self, session_id: str) -> int | None:
        with self.lock:
            return self.answers.get(session_id)

    def set_open(self, is_open: bool) -> None:
        with self.lock:
            self.open = is_open

    def counts(self) -> list[int]:
        with self.lock:
            votes = list(self.answers.values())
        return [votes.count(i) for i in range(len(self.question.options))]

    def begin_measure(self, now: float | None = None) -> None:
        """Mark a measurement as running; PollError (one line) while one already runs."""
        now = time.time() if now is None else now
        with self.lock:
            if self.question.experiment is None:
                raise PollError("This question has no experiment to measure: discuss it instead.")
            if self.measuring_since is not None and now - self.measuring_since < MEASURE_STALE_S:
                raise PollError(f"A measurement for this question is already running (started "
                                f"{now - self.measuring_since:.0f} s ago): its answer shows here when it ends.")
            self.measuring_since = now

    def end_measure(self, measured: Measured | None) -> None:
        """The measurement ended: its figure (None: failed or cancelled, the previous one stays)."""
        with self.lock:
            self.measuring_since = None
            if measured is not None:
                self.measured = measured

    @property
    def matched(self) -> int | None:
        return self.question.match(self.measured) if self.measured is not None else None


def csv_rows(polls: list[Poll]) -> list[dict]:
    """One row per option of each poll: the room's votes beside the measured figure."""
    rows = []
    for poll in polls:
        counts, matched, q = poll.counts(), poll.matched, poll.question
        total = sum(counts)
        for i, (opt, n) in enumerate(zip(q.options, counts)):
            rows.append(dict(
                poll=poll.serial, question_id=q.id, question=q.question, option=opt.label,
                predicted_value="" if opt.value is None else opt.value, votes=n,
                share=f"{n / total:.3f}" if total else "", answers=total,
                measured_value="" if poll.measured is None or poll.measured.value is None else f"{poll.measured.value:.4g}",
                measured=poll.measured.text if poll.measured else "", matches_measurement=matched == i,
                opened=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(poll.opened))))
    return rows


def to_csv(polls: list[Poll]) -> str:
    rows = csv_rows(polls)
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()
