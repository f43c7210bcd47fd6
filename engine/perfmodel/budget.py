"""Old Qin's budget: Amdahl's law over two segments — a speed-up only pays in proportion to its segment's share.

new time = p / s_prefill + (1 − p) / s_decode, with p the prefill (valley) share of the journey.
The fable: the valley is under 20% of the journey, so doubling only the valley saves 10%;
spending on both (valley ×2, bridge ×1.6) saves 40%. Reference: Amdahl (1967).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import EngineError


@dataclass(frozen=True)
class BudgetResult:
    prefill_share: float  # p: fraction of the original time spent in prefill
    prefill_speedup: float  # s_p
    decode_speedup: float  # s_d
    new_prefill: float  # p / s_p, as a fraction of the original total
    new_decode: float  # (1 − p) / s_d

    @property
    def new_time(self) -> float:
        return self.new_prefill + self.new_decode

    @property
    def saving(self) -> float:
        """Fraction of the original end-to-end time saved."""
        return 1.0 - self.new_time

    @property
    def speedup(self) -> float:
        return 1.0 / self.new_time

    @property
    def limit_if_only_prefill(self) -> float:
        """Best possible end-to-end speed-up with an infinitely fast valley: 1 / (1 − p)."""
        return float("inf") if self.prefill_share >= 1 else 1.0 / (1.0 - self.prefill_share)


def amdahl(prefill_share: float, prefill_speedup: float = 1.0, decode_speedup: float = 1.0) -> BudgetResult:
    if not 0.0 <= prefill_share <= 1.0:
        raise EngineError(f"the prefill share must be between 0 and 1 (got {prefill_share})")
    if prefill_speedup <= 0 or decode_speedup <= 0:
        raise EngineError("speed-up factors must be positive (1 = unchanged, 2 = twice as fast)")
    return BudgetResult(prefill_share, prefill_speedup, decode_speedup,
                        prefill_share / prefill_speedup, (1.0 - prefill_share) / decode_speedup)


def decode_speedup_for_saving(prefill_share: float, prefill_speedup: float, saving: float) -> float:
    """The bridge speed-up needed, given the valley's, to save `saving` of the journey (solves Amdahl for s_d)."""
    remaining = 1.0 - saving - prefill_share / prefill_speedup
    if remaining <= 0:
        raise EngineError("that saving is out of reach with this valley speed-up alone and a finite bridge speed-up")
    return (1.0 - prefill_share) / remaining


FABLE_SHARE = 0.2  # "the valley is under a fifth of the journey"
FABLE_SCENARIOS = {  # name: (valley speed-up, bridge speed-up)
    "Valley ×2 only": (2.0, 1.0),
    "Valley ×2 and bridge ×1.6": (2.0, decode_speedup_for_saving(FABLE_SHARE, 2.0, 0.40)),
}


def fable() -> dict[str, BudgetResult]:
    """The fable's two budgets at p = 0.2: 1 − (0.1 + 0.8) = 10% saved; 1 − (0.1 + 0.8/1.6) = 40% saved."""
    return {name: amdahl(FABLE_SHARE, sp, sd) for name, (sp, sd) in FABLE_SCENARIOS.items()}
