"""One way every fast path earns its place: fit, build, check against what runs without it, race it, keep the verdict.

A fast path (the C decode step, torch.compile's decode step, the prompts' C kernels, the float32 prompt pass) is
an object with `fit`, `build`, `check` and `race` (the `FastPath` protocol below). `decide` runs them the same
way for each, on this machine, against the model's backends so far (what would run without the path: its rival):

  1. `fit`: can it serve this model here at all? A typed `Fit`, with one line saying why not.
  2. the cache (measured_cache.py): a verdict kept for exactly this machine and model is used as it is; one that
     says the path lost means it is never built again.
  3. `build` (compile it, load it), then `check` (its outputs beside the rival's, on a short input).
  4. `race`: the path and its rival timed taking turns, best of a few rounds each (other programs only ever add
     time). Kept only if faster by more than MARGIN: ties go to what runs without it. A disturbed race is raced
     again at the next loads, as measured_cache.py says for every measurement (the matmul choice's too).

A path that cannot be built or checked here is not used, and the verdict says why in one line. TWO_BENDS_BACKENDS=plain
(or `pytest --backends=plain`) loads every model on the eager reference: the one switch that forces the fallbacks.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Protocol

from engine.core.backends import Backends
from engine.techniques import kernel_choice, measured_cache
from engine.techniques.kernel_choice import MARGIN

SWITCH = "TWO_BENDS_BACKENDS"  # "plain": every model on the eager reference (engine/techniques/kernels.py)


def forced_plain() -> str:
    """'forced by TWO_BENDS_BACKENDS=plain' when the switch says so, else ''."""
    value = os.environ.get(SWITCH, "").strip().lower()
    return f"forced by {SWITCH}={value}" if value == "plain" else ""


@dataclass(frozen=True)
class Fit:
    """Whether a fast path can serve a model here; when not, why, in one line a user reads."""

    ok: bool
    why_not: str = ""
    said: bool = False  # the reason is worth saying beside the kernels (something the user could change)

    @staticmethod
    def yes() -> Fit:
        return Fit(True)

    @staticmethod
    def no(why: str, said: bool = False) -> Fit:
        return Fit(False, why, said)


@dataclass
class Verdict:
    """What one fast path measured here against its rival, and whether it is kept."""

    use: bool
    fast_ms: float = 0.0
    rival_ms: float = 0.0
    setup_s: float = 0.0  # seconds to build (or load) it and check it, in the process that measured
    cached: bool = False  # read back from the cache file: not timed in this process
    note: str = ""  # why it is not used, when it could not be built, checked or timed
    at: str = ""  # what one timing was: "per step at context 128"
    race_s: float = 0.0  # how long the race took
    wait_s: float | None = None  # s its threads were runnable without a CPU (None: not measurable here)
    tries: int = 1  # races of this key so far (more than one only after disturbed ones)

    @property
    def wait_share(self) -> float:
        return measured_cache.wait_share(self.wait_s, self.race_s)

    @property
    def disturbed(self) -> bool:
        return measured_cache.disturbed(self.wait_s, self.race_s)

    def words(self, path: FastPath) -> str:
        if self.note:
            return f"{path.name}: not used ({self.note})"
        timing = f"{path.fast} {_ms(self.fast_ms)} ms vs {path.rival} {_ms(self.rival_ms)} ms {self.at}"
        where = "cached verdict" if self.cached else "measured now"
        if self.disturbed:
            where += (f"; other programs held the CPU for {self.wait_s:.2f} s of the {self.race_s:.2f} s raced, so "
                      f"the outcome may be theirs: {measured_cache.again('raced', self.tries)}")
        return (f"{path.name}: {'used' if self.use else 'not used'} ({timing}; {where}; building and checking took "
                f"{self.setup_s:.1f} s)")


def model_key(cfg) -> dict:
    """The model's shape, the part of a verdict's key every path shares."""
    return {"model": [cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.vocab_size]}


def _ms(ms: float) -> str:
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


class FastPath(Protocol):
    """One fast path: what it is called, how it is keyed, built, checked and raced, and where it goes."""

    name: str  # in the kernels' why: "decode step in C"
    fast: str  # its name in the timing: "C"
    rival: str  # what runs without it: "eager"

    def timed_at(self, lm) -> str: ...  # what one timing is: "per step at context 128"

    def fit(self, lm, backends: Backends) -> Fit: ...

    def key(self, lm) -> dict: ...  # what besides the machine makes a verdict valid (its source, its timing's size)

    def build(self, lm, backends: Backends, folder: Path): ...  # the built path; raises when it cannot be built

    def check(self, lm, backends: Backends, built) -> bool: ...  # its outputs close to the rival's

    def race(self, lm, backends: Backends, built) -> tuple[float, float]: ...  # (its ms, the rival's ms)

    def attach(self, backends: Backends, built) -> Backends: ...


_LOCK = threading.Lock()  # one build and measurement at a time in a process (they time each other otherwise)


def decide(path: FastPath, lm, backends: Backends, folder: Path | None = None,
           remeasure: bool = False) -> tuple[Backends, Verdict]:
    """`backends` with `path` attached where it was measured faster here (call where `path.fit` says ok), and the
    verdict; `backends` itself where it lost, failed, or a cached verdict says it lost."""
    folder = folder or measured_cache.default_cache_dir()
    key = measured_cache.machine_key(lm.model, lm.dtype) | path.key(lm) | {"what": path.name}
    with _LOCK:
        found = None if remeasure else _verdict(measured_cache.recall(folder, key))
        if found is not None and measured_cache.measure_again(found):  # raced again: kept to compare with
            earlier, found = found, None
        else:
            earlier = None
        if found is not None and not found.use:
            return backends, found
        begin = time.perf_counter()
        try:
            built = path.build(lm, backends, folder)
            ok = path.check(lm, backends, built)
        except Exception as exc:  # no compiler, a failed build, no room: the rival runs, and the reason is said
            return backends, Verdict(False, note=f"could not build it here: {failure(exc)}")
        setup = time.perf_counter() - begin
        if not ok:
            verdict = Verdict(False, setup_s=setup, note="its outputs differed from the rival's")
        elif found is not None:  # it won here before: checked on this build, not timed again
            return path.attach(backends, built), replace(found, setup_s=setup, cached=True)
        else:
            meter = kernel_choice.WaitMeter()
            meter.mark()
            begin = time.perf_counter()
            try:
                fast_ms, rival_ms = path.race(lm, backends, built)
            except Exception as exc:  # not cached: the next load may time it
                return backends, Verdict(False, setup_s=setup, note=f"could not time it here: {failure(exc)}")
            race_s = time.perf_counter() - begin
            wait = meter.lap().longest if meter.available else None  # the thread that waited longest
            verdict = Verdict(fast_ms < rival_ms * (1 - MARGIN), fast_ms, rival_ms, setup, at=path.timed_at(lm),
                              race_s=race_s, wait_s=wait)
            if earlier is not None:  # the earlier race was disturbed: the less disturbed of the two stands
                verdict.tries = earlier.tries + 1
                if earlier.wait_share < verdict.wait_share:
                    verdict = replace(earlier, tries=verdict.tries, setup_s=setup, cached=False)
        measured_cache.remember(folder, key, {k: v for k, v in asdict(verdict).items() if k != "cached"})
        return (path.attach(backends, built) if verdict.use else backends), verdict


def _verdict(record: dict | None) -> Verdict | None:
    names = {f.name for f in fields(Verdict)} - {"cached"}
    if record is None or set(record) != names:  # a record of another shape (an older version): measured again
        return None
    try:
        wait = record["wait_s"]
        return Verdict(bool(record["use"]), float(record["fast_ms"]), float(record["rival_ms"]),
                       float(record["setup_s"]), cached=True, note=str(record["note"]), at=str(record["at"]),
                       race_s=float(record["race_s"]), wait_s=None if wait is None else float(wait),
                       tries=int(record["tries"]))
    except (TypeError, ValueError):
        return None


def failure(exc: Exception) -> str:
    """An exception in one short line: its type and the start of its message."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:160]}" if message else type(exc).__name__


def take_turns(timers: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Each timer once per round, the order alternating, `rounds` rounds; the best seconds of each."""
    names = list(timers)
    best = dict.fromkeys(names, math.inf)
    for r in range(rounds):
        for name in (names if r % 2 else names[::-1]):
            best[name] = min(best[name], timers[name]())
    return best
