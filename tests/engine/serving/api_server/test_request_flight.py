"""The HTTP side ends an answer by the engine's own rule (engine/core/sequence.py): the end token unless
ignore_eos, then max_tokens; a stop string is its own, text-level addition. While it runs, a request's tokens count
in the KV-cache usage gauge."""
import asyncio

import pytest

import engine
from engine.core.trace import DecodeStep
from engine.serving.api_server.openai_schema import Ask
from engine.serving.api_server.request_flight import Flight, Served
from engine.serving.api_server.vllm_metrics import ServerMetrics
from engine.serving.scheduling.model_pool import describe
from engine.serving.scheduling.work import FirstToken, ModelSpec, Started, Token

SPEC = ModelSpec("tiny-llama", "cpu")


class Cancels:
    def __init__(self):
        self.cancelled = []

    def cancel(self, request):
        self.cancelled.append(request)


def finishes(lm, tokens: list[int], max_tokens: int, stop=(), **sampling) -> tuple[list, Cancels]:
    """Feed `tokens` as the scheduler would; the finish_reason of each piece until the answer is complete."""
    async def run():
        service = Cancels()
        served = Served("tiny-llama", SPEC, describe(lm, SPEC), 4096)
        ask = Ask("completion", "tiny-llama", prompts=["x"], max_tokens=max_tokens,
                  params=engine.SamplingParams(**sampling), stop=list(stop))
        flight = Flight(service, served, ServerMetrics("test"), ask, [1, 2, 3], max_tokens, 0.0)
        for i, t in enumerate(tokens):
            flight.sink.put(FirstToken(0.01, t, "") if i == 0 else Token(DecodeStep(0.01, 3 + i, 0), t, ""))
        out = []
        while (piece := await flight.next()) is not None:
            out.append(piece.finish)
        return out, service
    return asyncio.run(run())


@pytest.mark.parametrize("ignore_eos, want", [(False, [None, "stop"]), (True, [None, None, None, "length"])])
def test_the_end_token_ends_the_answer_unless_ignored(tiny_llama, ignore_eos, want):
    eos = tiny_llama.config.eos_token_ids[0]
    got, service = finishes(tiny_llama, [7, eos, 8, 9], 4, ignore_eos=ignore_eos)
    assert got == want and not service.cancelled  # the engine ends these itself: nothing to cancel


def test_max_tokens_ends_it_with_length(tiny_llama):
    assert finishes(tiny_llama, [7, 8, 9], 3)[0] == [None, None, "length"]


def test_a_stop_string_ends_it_here_and_frees_the_engine(tiny_llama):
    tok = tiny_llama.tokenizer
    ids = tok.encode("one rider at a time", add_special_tokens=False)
    got, service = finishes(tiny_llama, ids, len(ids) + 5, stop=["rider"])
    assert got[-1] == "stop" and len(got) < len(ids) and len(service.cancelled) == 1


@pytest.mark.parametrize("ends", ["finished", "client left"])
def test_a_request_holds_its_tokens_in_the_kv_gauge_until_it_ends(tiny_llama, ends):
    async def run():
        metrics = ServerMetrics("test", kv_capacity=40)
        served = Served("tiny-llama", SPEC, describe(tiny_llama, SPEC), 4096)
        ask = Ask("completion", None, prompts=["x"], max_tokens=4, params=engine.SamplingParams(ignore_eos=True))
        flight = Flight(Cancels(), served, metrics, ask, [1, 2, 3], 4, 0.0)
        seen = [metrics.kv_tokens]
        for i, event in enumerate([Started(0.0), FirstToken(0.01, 7, ""), Token(DecodeStep(0.01, 4, 0), 8, "")]):
            flight.sink.put(event)
            if i:  # Started yields no piece: the next() after it returns the first token's
                await flight.next()
                seen.append(metrics.kv_tokens)
        if ends == "finished":
            for t in (9, 10):
                flight.sink.put(Token(DecodeStep(0.01, 5, 0), t, ""))
            while await flight.next() is not None:
                pass
        else:
            flight.close()
        return seen, metrics.kv_tokens, metrics.kv_share()
    seen, after, share = asyncio.run(run())
    assert seen == [0, 3 + 1, 3 + 2] and after == 0 and share == 0.0
