"""Published GPU measurements, and the card model's prediction for each: the table the model is fitted on and checked by.

assets/published/gpu_measurements.csv holds one measurement a row, each with its source (a link and where in it):
  split   calibration   the rows the class efficiencies are fitted on (benchmarks/calibrate_card_model.py)
          validation    held back: never seen by the fit; tests/engine/perfmodel/test_published.py wants each within
                        TOLERANCE
          out-of-scope  read, shown with the model's error, and left out of the check, each with the reason in `note`
  kind    ttft          a prefill of `prompt` tokens for `batch` sequences
          tpot          one decode step at `context` tokens of cache, `batch` sequences
          e2e           a whole request: TTFT + (output - 1) decode steps at the mean context
assets/published/gpu_ratios.csv pairs two rows (the same work on two cards): the published speed-up beside the model's.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError
from engine.perfmodel import card_model as cm
from engine.perfmodel.cards import Card, card
from engine.perfmodel.model_shapes import model_shape

FOLDER = Path(__file__).resolve().parents[2] / "assets" / "published"
MEASUREMENTS = FOLDER / "gpu_measurements.csv"
RATIOS = FOLDER / "gpu_ratios.csv"
TOLERANCE = 0.35  # the bar: every held-back row within ±35 %
SPLITS = ("calibration", "validation", "out-of-scope")
KINDS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class Measurement:
    id: str
    split: str
    kind: str
    model: str
    card: str
    dtype: str
    gpus: int
    batch: int
    prompt: int
    output: int
    context: int | None
    published_ms: float
    software: str
    source: str
    where: str
    note: str = ""

    def setup(self, on: Card | None = None) -> cm.Setup:
        shape = model_shape(self.model)
        return cm.Setup(shape.config, on or card(self.card), self.dtype, self.gpus, shape.name)

    def predicted_ms(self, on: Card | None = None) -> float:
        """The card model's time for this row's work (on `on`, a card with other class values, when given)."""
        s = self.setup(on)
        if self.kind == "ttft":
            return cm.prefill(s, self.prompt, self.batch).seconds * 1e3
        if self.kind == "tpot":
            return cm.decode_step(s, self.context or self.prompt + self.output // 2, self.batch).seconds * 1e3
        steps = max(self.output - 1, 0)
        step = cm.decode_step(s, self.prompt + max(self.output, 1) // 2, self.batch).seconds if steps else 0.0
        return (cm.prefill(s, self.prompt, self.batch).seconds + steps * step) * 1e3

    def error(self, on: Card | None = None) -> float:
        """(model - published) / published."""
        return self.predicted_ms(on) / self.published_ms - 1.0


def _int(text: str, name: str, row: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise EngineError(f"{MEASUREMENTS.name}, row {row}: '{name}' must be a whole number, not {text!r}") from None


def load(path: Path | None = None) -> list[Measurement]:
    """Every row of the table, checked: a bad row is one clear line naming it."""
    path = path or MEASUREMENTS
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rid = r.get("id") or "?"
            if r["split"] not in SPLITS or r["kind"] not in KINDS:
                raise EngineError(f"{path.name}, row {rid}: split must be one of {SPLITS}, kind one of {KINDS}")
            try:
                value = float(r["published_ms"])
            except ValueError:
                raise EngineError(f"{path.name}, row {rid}: published_ms must be a number") from None
            if not value > 0:
                raise EngineError(f"{path.name}, row {rid}: published_ms must be > 0")
            if not (r["source"].startswith("https://") and r["where"].strip()):
                raise EngineError(f"{path.name}, row {rid}: every row needs its source (a link) and where in it")
            out.append(Measurement(rid, r["split"], r["kind"], r["model"], r["card"], r["dtype"],
                                   _int(r["gpus"], "gpus", rid), _int(r["batch"], "batch", rid),
                                   _int(r["prompt"], "prompt", rid), _int(r["output"], "output", rid),
                                   _int(r["context"], "context", rid) if r["context"] else None, value,
                                   r["software"], r["source"], r["where"], r.get("note", "")))
    return out


@dataclass(frozen=True)
class Ratio:
    """The same work on two cards: how much faster the second is, published and modelled."""
    id: str
    stage: str  # "prefill" or "decode"
    slow: Measurement
    fast: Measurement
    note: str

    @property
    def published(self) -> float:
        return self.slow.published_ms / self.fast.published_ms

    @property
    def predicted(self) -> float:
        return self.slow.predicted_ms() / self.fast.predicted_ms()


def load_ratios(rows: list[Measurement] | None = None, path: Path | None = None) -> list[Ratio]:
    by_id = {m.id: m for m in (rows or load())}
    out = []
    with open(path or RATIOS, newline="") as f:
        for r in csv.DictReader(f):
            missing = [k for k in (r["slow"], r["fast"]) if k not in by_id]
            if missing:
                raise EngineError(f"{RATIOS.name}, ratio {r['id']}: no measurement {', '.join(missing)}")
            out.append(Ratio(r["id"], r["stage"], by_id[r["slow"]], by_id[r["fast"]], r.get("note", "")))
    return out
