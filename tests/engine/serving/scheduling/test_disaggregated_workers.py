"""The two workers' own steps, run in this process: a prefill packs a cart, a join unpacks it, and the riders then
give the tokens `generate` gives; a cancel mid-prefill sends no cart, a cart for a cancelled request is dropped."""
import dataclasses
import os

import pytest

import engine
from engine.serving.scheduling.disaggregated_workers import Carried, HandedBatch, _join, _prefill, _step
from engine.serving.scheduling.kv_handover import leftovers
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.work import Done, Failed, FirstToken, ModelSpec, Request, Started, Token


class FakeLink:
    """What a worker's pipe would carry, kept in a list; events go to the request's own queue."""

    def __init__(self):
        self.sent, self.works, self.cancelled = [], {}, set()

    def send(self, kind, key, payload):
        self.sent.append((kind, key, payload))

    def log(self, worker, kind, start, end, ids, **extra):
        self.sent.append(("log", 0, dict(worker=worker, kind=kind, ids=ids, **extra)))

    def of(self, kind):
        return [payload for k, _, payload in self.sent if k == kind]


def events(req):
    out = []
    while not req.events.empty():
        out.append(req.events.get())
    return out


GREEDY = engine.SamplingParams(ignore_eos=True)


def request(n, ids, params=GREEDY):
    return Request(model=ModelSpec("tiny-llama", "cpu"), prompt_ids=list(ids), max_new_tokens=n, params=params)


@pytest.fixture
def session():
    name = "test" + os.urandom(3).hex()
    yield name
    assert leftovers(name) == []  # every test leaves shared memory as it found it


def pool_of(lm):
    return ModelPool(loader=lambda *args, **kwargs: lm)


def ride(lm, reqs, session):
    """Prefill each request, hand its cart to one bridge, step until all are done; the final events."""
    valley, bridge_link, batches = FakeLink(), FakeLink(), {}
    pool = pool_of(lm)
    for req in reqs:
        _prefill(valley, pool, req, session)
    for key, carried in [(k, p) for kind, k, p in valley.sent if kind == "handover"]:
        req = next(r for r in reqs if r.id == key)
        _join(bridge_link, pool, batches, 8, req, carried)
    while any(b.size for b in batches.values()):
        for batch in batches.values():
            _step(bridge_link, batch)
    return valley, bridge_link


@pytest.mark.parametrize("params", [engine.SamplingParams(ignore_eos=True),
                                    engine.SamplingParams(temperature=0.9, top_k=20, seed=7, ignore_eos=True)],
                         ids=["greedy", "seeded"])
def test_handed_over_riders_give_the_tokens_generate_gives(tiny_llama, session, params):
    prompts = [list(range(1, 9)), list(range(3, 40)), [5, 9, 11]]
    reqs = [request(12, ids, params) for ids in prompts]
    valley, bridge = ride(tiny_llama, reqs, session)
    for ids, req in zip(prompts, reqs):
        seen = events(req)
        assert isinstance(seen[0], Started) and isinstance(seen[1], FirstToken)
        assert all(isinstance(e, Token) for e in seen[2:-1])
        trace = seen[-1].result
        assert trace.output_ids == engine.generate(tiny_llama, ids, 12, params, warmup=False).output_ids
        assert trace.settings["scheduler"] == "disaggregated"
        assert trace.cpu_wait_seconds is None and "prefill worker" in trace.cpu_wait_note  # half of it ran elsewhere
        cart = trace.settings["handover"]
        assert cart["bytes"] == trace.kv_bytes_per_token * len(ids)
        assert cart["prefill_start"] < cart["prefill_end"] < cart["joined"]
        assert cart["prefill_end"] - cart["prefill_start"] == pytest.approx(trace.prefill_seconds, abs=1e-3)
    assert [entry["kind"] for entry in valley.of("log")].count("prefill") == 3
    assert any(entry["kind"] == "step" and entry["riders"] == 3 for entry in bridge.of("log"))


def test_a_request_cancelled_mid_prefill_sends_no_cart(tiny_llama, session):
    req = request(8, range(1, 30))

    class CancelledDuring:
        """The model, except that the consumer leaves while the valley works on its prompt."""

        def __call__(self, *args, **kwargs):
            req.cancel()
            return tiny_llama.model(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(tiny_llama.model, name)

    valley = FakeLink()
    _prefill(valley, pool_of(dataclasses.replace(tiny_llama, model=CancelledDuring())), req, session)
    final = events(req)[-1]
    assert isinstance(final, Failed) and final.cancelled
    assert valley.of("handover") == []


def test_a_cart_for_a_request_cancelled_while_it_crossed_is_dropped(tiny_llama, session):
    req = request(8, range(1, 30))
    valley = FakeLink()
    _prefill(valley, pool_of(tiny_llama), req, session)
    (carried,) = valley.of("handover")
    assert isinstance(carried, Carried) and len(leftovers(session)) == 1  # the cart waits in shared memory
    req.cancel()
    batches = {}
    _join(FakeLink(), pool_of(tiny_llama), batches, 8, req, carried)
    final = events(req)[-1]
    assert isinstance(final, Failed) and final.cancelled
    assert not any(b.size for b in batches.values())


def test_a_rider_cancelled_on_the_bridge_leaves_its_row(tiny_llama, session):
    stays, leaves = request(6, range(1, 10)), request(50, range(1, 20))
    valley, bridge, pool = FakeLink(), FakeLink(), pool_of(tiny_llama)
    batches = {}
    for req in (stays, leaves):
        _prefill(valley, pool, req, session)
    for req, carried in zip((stays, leaves), valley.of("handover")):
        _join(bridge, pool, batches, 8, req, carried)
    batch: HandedBatch = batches[stays.model]
    _step(bridge, batch)
    leaves.cancel()
    _step(bridge, batch)
    assert batch.size == 1 and batch.seqs[0].request is stays
    assert isinstance(events(leaves)[-1], Failed)
    while batch.size:
        _step(bridge, batch)
    assert isinstance(events(stays)[-1], Done)


def test_a_one_token_request_ends_in_the_valley(tiny_llama, session):
    req = request(1, range(1, 10))
    valley = FakeLink()
    _prefill(valley, pool_of(tiny_llama), req, session)
    assert valley.of("handover") == []
    assert events(req)[-1].result.output_ids == engine.generate(tiny_llama, list(range(1, 10)), 1, ignore_eos=True,
                                                                 warmup=False).output_ids
