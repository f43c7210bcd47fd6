"""Predict, then measure: the room commits to an answer before the engine gives its own (peer instruction, Mazur 1997).

Streamlit-free and thread-safe. Questions are plain JSON files in assets/polls/ (one question per file, fields in
QUESTION_FIELDS; a file with bad fields is skipped with one clear line, the rest load). A question names an
experiment from EXPERIMENTS: a registered lab job (engine/serving/scheduling/lab_jobs.py) and how its result
becomes one measured (or computed-from-measured) figure. Options with a `range` partition every possible figure, so
the measurement lands in exactly one of them and that option's own explanation is the one shown: an explanation can
never contradict the value it explains.

A Poll is one round: one answer per member of the room (a browser), changeable until the answers lock (the teacher
locks them, reveals them, or presses Measure). Nobody sees the room's answers before the reveal. A revote after
discussion is a new round of the same question; every round keeps its own pre-reveal answers. A room's rounds hand
every change to the room's keeper (ui/room/keeper.py) as it happens, so a restart finds them. `to_csv` exports each
round's answers beside what was measured and when. Answers carry no time: nothing scores speed.
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

from ui.room.poll_experiments import EXPERIMENTS, Experiment, Measured, PollError

BANK_DIR = Path(__file__).resolve().parents[2] / "assets" / "polls"
QUESTION_FIELDS = {  # the fields of a question file, documented for teachers (README, assets/polls/README.md)
    "id": "short name (default: the file's name)",
    "question": "the question as the room reads it (required)",
    "options": "2 to 8 answers: text, or {'label': text, 'value': number} / {'label': text, 'key': word} / "
               "{'label': text, 'range': [low, high or null], 'explain': text}",
    "measure": "{'experiment': one of EXPERIMENTS, its numbers...}: what Measure runs (leave out: no measurement)",
    "explain": "what the fable says, shown once measured (optional)",
    "order": "where it sits in the list (optional number)",
}
MIN_OPTIONS, MAX_OPTIONS, MAX_TEXT, MAX_EXPLAIN = 2, 8, 400, 800
MEASURE_STALE_S = 900.0  # a measurement left running this long (its tab gone) no longer blocks a new one


# --- questions -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    label: str
    value: float | None = None  # the predicted figure this answer stands for
    key: str = ""  # a categorical answer's name
    low: float | None = None  # with `high`: the measured figures this option stands for, low ≤ x < high
    high: float | None = None  # None: no upper end
    explain: str = ""  # what a measurement in this range means (shown only when the measurement lands here)

    @property
    def ranged(self) -> bool:
        return self.low is not None

    def holds(self, x: float) -> bool:
        return self.ranged and self.low <= x and (self.high is None or x < self.high)


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
        """The option the measurement answers: the one with its key, the one whose range holds the figure, or (a
        teacher's written question, without ranges) the nearest value on a log scale."""
        if measured.key:
            return next((i for i, o in enumerate(self.options) if o.key == measured.key), None)
        if measured.value is None or not measured.value > 0:
            return None
        if any(o.ranged for o in self.options):
            return next((i for i, o in enumerate(self.options) if o.holds(measured.value)), None)
        valued = [(i, o.value) for i, o in enumerate(self.options) if o.value is not None and o.value > 0]
        if not valued:
            return None
        return min(valued, key=lambda iv: abs(math.log(iv[1] / measured.value)))[0]

    def explanation(self, measured: Measured | None) -> str:
        """What the room reads once measured: the matched option's own explanation, then the question's."""
        if measured is None:
            return ""
        matched = self.match(measured)
        own = self.options[matched].explain if matched is not None else ""
        return "\n\n".join(text for text in (own, self.explain) if text)

    def to_json(self) -> str:
        opts = []
        for o in self.options:
            item = {k: v for k, v in dict(label=o.label, value=o.value, key=o.key, explain=o.explain).items()
                    if v not in (None, "")}
            if o.ranged:
                item["range"] = [o.low, o.high]
            opts.append(item)
        data = dict(id=self.id, question=self.question, options=opts, measure=self.measure, explain=self.explain)
        return json.dumps({k: v for k, v in data.items() if v not in (None, "")}, indent=2, ensure_ascii=False)


def _text(data: dict, name: str, required: bool = False, most: int = MAX_TEXT) -> str:
    value = data.get(name, "")
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > most:
        raise PollError(f"'{name}' must be text of 1 to {most} characters")
    return value.strip()


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _option(raw) -> Option:
    if isinstance(raw, str):
        raw = {"label": raw}
    if not isinstance(raw, dict) or set(raw) - {"label", "value", "key", "range", "explain"}:
        raise PollError("each option must be text or {'label', 'value', 'key', 'range', 'explain'}")
    label = _text(raw, "label", required=True)
    value = raw.get("value")
    if value is not None and (not _number(value) or not value > 0):
        raise PollError(f"option '{label}': 'value' must be a positive number")
    key = raw.get("key", "")
    if not isinstance(key, str):
        raise PollError(f"option '{label}': 'key' must be a word")
    low = high = None
    if "range" in raw:
        bounds = raw["range"]
        if (not isinstance(bounds, list) or len(bounds) != 2 or not _number(bounds[0]) or bounds[0] < 0
                or not (bounds[1] is None or (_number(bounds[1]) and bounds[1] > bounds[0]))):
            raise PollError(f"option '{label}': 'range' must be [low, high] with 0 ≤ low < high (high null: no end)")
        low, high = float(bounds[0]), None if bounds[1] is None else float(bounds[1])
    return Option(label, float(value) if value is not None else None, key, low, high, _text(raw, "explain", most=MAX_EXPLAIN))


def _check_ranges(options: tuple[Option, ...]) -> None:
    """Ranged options must cover every figure from 0 upwards exactly once, in order: then a measurement lands in one
    option, and only that option's explanation is shown."""
    ranged = [o for o in options if o.ranged]
    if not ranged:
        return
    if len(ranged) != len(options):
        raise PollError("either every option has a 'range' or none has")
    if ranged[0].low != 0 or ranged[-1].high is not None:
        raise PollError("the ranges must start at 0 and the last one must have no end (null)")
    for before, after in zip(ranged, ranged[1:]):
        if before.high != after.low:
            raise PollError(f"the ranges of '{before.label}' and '{after.label}' must meet (no gap, no overlap)")


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
    _check_ranges(opts)
    return Question(qid, _text(data, "question", required=True), opts, _measure(data.get("measure")),
                    _text(data, "explain", most=MAX_EXPLAIN), float(order))


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
    return parse_question(dict(id="written", question=text, options=options, **({"measure": measure} if measure else {})))


# --- the poll: one round of one question the room answers -----------------------------------------------------
_serials = itertools.count(1)
_serials_lock = threading.Lock()


def serials_after(serial: int) -> None:
    """New rounds get serials above `serial` (the highest a restarted room read back from its file)."""
    global _serials
    with _serials_lock:
        nxt = next(_serials)
        _serials = itertools.count(max(nxt, serial + 1))


@dataclass
class Poll:
    question: Question
    serial: int = field(default_factory=lambda: next(_serials))  # a new poll (or round) gets new widget keys
    answers: dict[str, int] = field(default_factory=dict)  # member id (a browser) -> option index, one each
    open: bool = True  # answers may still change
    revealed: bool = False  # the room's answers are shown (after the reveal or the measurement)
    measured: Measured | None = None
    measuring_since: float | None = None
    opened: float = field(default_factory=time.time)
    round: int = 1  # 1, then 2, 3 ... for each revote of the same question
    earlier: list = field(default_factory=list, repr=False)  # the earlier rounds of this question (revotes)
    measured_at: float | None = None
    interrupted: str = ""  # what a restart of the server cut short, in words ("" when nothing)
    keeper: object = field(default=None, repr=False, compare=False)  # the room's file (ui/room/keeper.py); None: solo
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _kept(self) -> None:
        if self.keeper is not None:
            self.keeper.save_round(self)

    @property
    def first_serial(self) -> int:
        """Round 1 of this question (this poll itself when it is round 1)."""
        return self.earlier[0].serial if self.earlier else self.serial

    def answer(self, member_id: str, index: int) -> None:
        with self.lock:
            if not self.open:
                raise PollError("The answers are locked: they no longer change (a revote would be a new round).")
            if not isinstance(index, int) or not 0 <= index < len(self.question.options):
                raise PollError("That answer is not one of this question's options.")
            self.answers[member_id] = index
        if self.keeper is not None:
            self.keeper.save_answer(self, member_id, index)

    def answer_of(self, member_id: str) -> int | None:
        with self.lock:
            return self.answers.get(member_id)

    @property
    def settled(self) -> bool:
        """Revealed, measured or being measured: the answers stay locked for good (a revote is a new round)."""
        return self.revealed or self.measured is not None or self.measuring_since is not None

    def set_open(self, is_open: bool) -> None:
        """Lock the answers, or unlock them while nobody has seen the room's answers nor a measurement."""
        with self.lock:
            if is_open and self.settled:
                raise PollError("These answers were revealed or measured: they stay as given. Start a revote instead.")
            self.open = is_open
        self._kept()

    def reveal(self) -> None:
        """Show the room's answers to everyone: the answers lock first, so what was given before is what counts."""
        with self.lock:
            self.open = False
            self.revealed = True
        self._kept()

    def revote(self) -> Poll:
        """A new round of the same question after discussion: answers start from zero, hidden until revealed."""
        with self.lock:
            self.open = False
            nxt = Poll(self.question, round=self.round + 1, earlier=[*self.earlier, self], keeper=self.keeper)
        self._kept()
        return nxt

    def counts(self) -> list[int]:
        with self.lock:
            votes = list(self.answers.values())
        return [votes.count(i) for i in range(len(self.question.options))]

    def begin_measure(self, now: float | None = None) -> None:
        """Mark a measurement as running and lock the answers; PollError (one line) while one already runs."""
        now = time.time() if now is None else now
        with self.lock:
            if self.question.experiment is None:
                raise PollError("This question has no experiment to measure: discuss it instead.")
            if self.measuring_since is not None and now - self.measuring_since < MEASURE_STALE_S:
                raise PollError(f"A measurement for this question is already running (started "
                                f"{now - self.measuring_since:.0f} s ago): its answer shows here when it ends.")
            self.open = False  # the answers given before Measure are the ones that count
            self.measuring_since, self.interrupted = now, ""
        self._kept()

    def end_measure(self, measured: Measured | None, now: float | None = None) -> None:
        """The measurement ended: its figure (None: failed or cancelled, the previous one stays). A figure reveals
        the answers, and answers the earlier rounds of the same question too."""
        now = time.time() if now is None else now
        with self.lock:
            self.measuring_since = None
            if measured is not None:
                self.measured, self.measured_at = measured, now
                self.revealed = True
        self._kept()
        if measured is not None:
            for earlier in self.earlier:
                with earlier.lock:
                    earlier.measured, earlier.measured_at = measured, now
                earlier._kept()

    @property
    def matched(self) -> int | None:
        return self.question.match(self.measured) if self.measured is not None else None


def csv_rows(polls: list[Poll]) -> list[dict]:
    """One row per option of each poll round: the room's answers (as they stood when it locked) beside the measured
    figure, read when called (a download builds its file at the click)."""
    rows = []
    for poll in polls:
        counts, matched, q = poll.counts(), poll.matched, poll.question
        total = sum(counts)
        for i, (opt, n) in enumerate(zip(q.options, counts)):
            rows.append(dict(
                poll=poll.serial, round=poll.round, question_id=q.id, question=q.question, option=opt.label,
                predicted_value="" if opt.value is None else opt.value, votes=n,
                share=f"{n / total:.3f}" if total else "", answers=total,
                measured_value="" if poll.measured is None or poll.measured.value is None else f"{poll.measured.value:.4g}",
                measured=poll.measured.text if poll.measured else "",
                how=poll.measured.how if poll.measured else "", matches_measurement=matched == i,
                opened=_when(poll.opened), measured_at=_when(poll.measured_at) if poll.measured is not None else ""))
    return rows


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t is not None else ""


def to_csv(polls: list[Poll]) -> str:
    rows = csv_rows(polls)
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()
