"""The crossed experiment's words follow its verdicts: a remedy real here and paying only on its own kind of request is
said so; one that did not shorten its own phase in every round is called no remedy here; Amdahl's prediction sits
beside the measured end-to-end speed-up (synthetic timings: the words are under test, not this machine)."""
from engine.labs.crossed_remedies import CrossedResult
from engine.labs.timed_request import Timing
from ui.text import crossed_numbers as cx

REQUESTS = {"valley-heavy": (256, 4), "bridge-heavy": (16, 48)}


def timing(ttft: float, step: float, steps: int, wait: float = 0.0) -> Timing:
    return Timing(256, 0, ttft, [step] * steps, wait, 0.0)


def result(configs: dict) -> CrossedResult:
    """configs: name -> {request: [(ttft, step) per round]}"""
    r = CrossedResult("m", "cpu", "flat batched loop (any batch)", REQUESTS,
                      {"prefix": ("prefix caching", "prefill"), "int8": ("int8 weights", "decode")},
                      {"fused": "no fused step here"}, rounds=3, planned_rounds=3)
    for config, by_request in configs.items():
        for request, rounds in by_request.items():
            n = REQUESTS[request][1] - 1
            r.timings[(config, request)[::-1]] = [timing(t, s, n) for t, s in rounds]
    return r


JITTER = (1.0, 1.02, 0.98)
MEASURED = result({
    "baseline": {"valley-heavy": [(1.0 * j, 0.05) for j in JITTER], "bridge-heavy": [(0.06 * j, 0.05) for j in JITTER]},
    "prefix": {"valley-heavy": [(0.15 * j, 0.05) for j in JITTER], "bridge-heavy": [(0.02, 0.05 * j) for j in JITTER]},
    "int8": {"valley-heavy": [(1.0, 0.05 * j) for j in JITTER], "bridge-heavy": [(0.06, 0.05 * j) for j in (0.9, 1.1, 1.0)]},
})


def test_a_valley_remedy_pays_only_where_the_valley_is_the_journey():
    story = cx.story(MEASURED)
    prefix = next(p for p in story.split("\n\n") if p.startswith("**prefix caching**"))
    assert "its own phase ▲" in prefix and "Real here, and it paid only where the valley was the journey" in prefix
    assert "● ×" in prefix.split("on the valley-heavy request")[1]  # the bridge-heavy journey: no change beyond spread


def test_a_bridge_remedy_whose_rounds_disagree_gets_no_verdict():
    int8 = next(p for p in cx.story(MEASURED).split("\n\n") if p.startswith("**int8 weights**"))
    assert "too busy to tell whether it is a remedy here" in int8 and "Real here" not in int8
    assert "Not measured here: fused: no fused step here" in cx.story(MEASURED)


def test_amdahl_sits_beside_the_measurement():
    cells = {(c.remedy, c.request): c for c in cx.cells(MEASURED)}
    c = cells[("prefix", "valley-heavy")]
    p = c.share
    assert abs(c.amdahl - 1 / (p / c.ttft.median + (1 - p) / c.tpot.median)) < 1e-12
    table = cx.table(MEASURED)
    assert list(table["rounds"]) == [3, 3, 3, 3] and table["end to end"][0].startswith("▲")


def test_the_lights_are_grey_without_a_verdict():
    rows, cols, z, text = cx.matrix(MEASURED)
    assert rows == ["prefix caching [valley]", "int8 weights [bridge]"] and cols == list(REQUESTS)
    assert z[0][0] > 0 and z[0][1] == 0.0 and text[0][1].startswith("●")


def test_a_remedy_slower_in_every_round_is_no_remedy_here():
    slower = result({
        "baseline": {"valley-heavy": [(1.0 * j, 0.05) for j in JITTER],
                     "bridge-heavy": [(0.06, 0.05 * j) for j in JITTER]},
        "int8": {"valley-heavy": [(1.3 * j, 0.05) for j in JITTER], "bridge-heavy": [(0.06, 0.07 * j) for j in JITTER]},
    })
    slower.remedies = {"int8": ("int8 weights", "decode")}
    assert "slower in every round, so it is no remedy on this machine" in cx.story(slower)


def test_a_remedy_that_paid_more_on_the_other_request_is_not_explained_by_its_share():
    """Amdahl says a remedy of one segment pays more where that segment is the journey; when the measurement says the
    opposite (here int8 sped the valley too, and the valley-heavy trip gained less), the words must not claim it."""
    both = result({
        "baseline": {"valley-heavy": [(1.0 * j, 0.05) for j in JITTER], "bridge-heavy": [(0.06 * j, 0.05) for j in JITTER]},
        "prefix": {"valley-heavy": [(0.5 * j, 0.05) for j in JITTER], "bridge-heavy": [(0.03 * j, 0.05) for j in JITTER]},
        "int8": {"valley-heavy": [(0.4 * j, 0.04) for j in JITTER], "bridge-heavy": [(0.06 * j, 0.045) for j in JITTER]},
    })
    cells = {(c.remedy, c.request): c for c in cx.cells(both)}
    assert cells[("int8", "bridge-heavy")].total.median < cells[("int8", "valley-heavy")].total.median
    int8 = next(p for p in cx.story(both).split("\n\n") if p.startswith("**int8 weights**"))
    assert "It shortened both journeys, but no more where the bridge was the journey" in int8
    assert "in proportion to its segment's share" not in int8
