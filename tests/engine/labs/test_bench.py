"""The bench's round orders: every timer runs once per round, and no timer always runs right after the same one
(the timer after vLLM inherits its spinning threads; a plain rotation gave that seat to `fast` every round)."""
from collections import Counter

import pytest

from engine.labs.bench import balanced_orders, medians


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_each_order_runs_every_timer_and_each_timer_follows_every_other_equally(n):
    orders = balanced_orders(n)
    assert all(sorted(order) == list(range(n)) for order in orders)
    pairs = Counter((a, b) for order in orders for a, b in zip(order, order[1:]))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1
    assert Counter(order[0] for order in orders) == Counter({i: len(orders) // n for i in range(n)})


def test_medians_runs_each_timer_once_a_round_and_no_timer_always_follows_vllm():
    calls: list[str] = []

    def timer(name, seconds):
        def run():
            calls.append(name)
            return seconds
        return run

    got = medians(3, {name: timer(name, s) for name, s in (("fast", 1.0), ("plain", 2.0), ("hf", 3.0), ("vLLM", 4.0))})
    assert got == {"fast": 1.0, "plain": 2.0, "hf": 3.0, "vLLM": 4.0}
    rounds = [calls[i:i + 4] for i in range(0, 12, 4)]
    assert all(sorted(r) == ["fast", "hf", "plain", "vLLM"] for r in rounds)
    after_vllm = {r[r.index("vLLM") + 1] for r in rounds if r[-1] != "vLLM"}
    assert len(after_vllm) == 2 and "fast" not in after_vllm  # a rotation put fast after vLLM in every round
