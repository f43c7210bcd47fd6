"""The HTTP server's side of one request: from a checked Ask to token ids in, text pieces out, metrics kept.

The scheduler runs on its own thread (or in the worker process); it pushes each request's events
(Started, FirstToken, Token, Done, Failed) into that request's sink. Here the sink hands them to
the asyncio event loop, so waiting for the next token never blocks the server. A `Flight` turns
events into text pieces (engine/serving/api_server/text_stream.py), decides when the answer is complete
and records vLLM's metrics on the way. The end-of-sequence token and max_tokens end it by the engine's
own rule (a Sequence, engine/core/sequence.py, mirrors the scheduler's); only a stop *string* is this
side's own (text-level, OpenAI's API): then the request is cancelled in the scheduler, which frees its
sequence at the next step.
"""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from engine.core.prompting import chat_ids, encode_prompt
from engine.core.sequence import EOS, LENGTH, Sequence
from engine.errors import EngineError
from engine.serving.api_server.openai_schema import ApiError, Ask
from engine.serving.api_server.text_stream import TextStream
from engine.serving.api_server.vllm_metrics import ServerMetrics
from engine.serving.scheduling.work import Done, Failed, FirstToken, ModelSpec, QueueFull, Request, Started, Token

SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "seed", "ignore_eos")
FINISH = {EOS: "stop", LENGTH: "length"}  # the engine's stop reason -> OpenAI's finish_reason


@dataclass
class Served:
    """The model behind the server: its public names, what the scheduler loads, and its description."""
    name: str  # the first name clients may put in "model": answers and metrics carry it
    spec: ModelSpec
    info: object  # engine.serving.scheduling.work.ModelInfo: config, tokenizer, sizes
    max_new_tokens_cap: int  # the operator's limit per request
    aliases: tuple[str, ...] = ()  # more names a request may use (vLLM's --served-model-name with several)
    slots: int = 1  # sequences the scheduler runs at once: 1 in queue mode, max_batch in batch mode

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass
class Piece:
    text: str  # text released with this token ("" while held back)
    token_id: int
    finish: str | None  # "length" or "stop" on the last token, else None


class _LoopSink:
    """A request's event queue as the scheduler sees it (`put` from any thread), read by the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.queue = loop, asyncio.Queue()

    def put(self, event) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


def prompt_ids(served: Served, ask: Ask, index: int = 0) -> list[int]:
    """Prompt `index`'s token ids (for chat: the chat template applied to the messages); ApiError 400 when unusable."""
    param = "messages" if ask.kind == "chat" else "prompt"
    try:
        return chat_ids(served.info, ask.messages) if ask.kind == "chat" else \
            encode_prompt(served.info, ask.prompts[index])
    except EngineError as exc:
        raise ApiError(400, str(exc), param) from None
    except Exception as exc:  # a chat template may refuse some role orders
        what = "the chat template could not format these messages" if ask.kind == "chat" else \
            "the tokenizer could not read this prompt"
        raise ApiError(400, f"{what}: {exc}", param) from None


def checked_max_tokens(served: Served, ask: Ask, n_prompt: int) -> int:
    """max_tokens against the context window and the operator's cap; the sampling values against their ranges."""
    cfg, name = served.info.config, served.name
    limit = cfg.max_seq_len
    param = "messages" if ask.kind == "chat" else "prompt"
    if n_prompt >= limit:
        raise ApiError(400, f"the prompt is {n_prompt} tokens but {name} holds {limit} tokens in all (prompt + output); "
                            f"shorten it to at most {limit - 1} tokens", param, "context_length_exceeded")
    room = limit - n_prompt
    max_tokens = ask.max_tokens if ask.max_tokens is not None else min(room, served.max_new_tokens_cap)
    if max_tokens > room:
        raise ApiError(400, f"max_tokens={max_tokens} does not fit: the prompt is {n_prompt} tokens and {name}'s context "
                            f"holds {limit}, so max_tokens can be at most {room} for this prompt", "max_tokens",
                       "context_length_exceeded")
    if max_tokens > served.max_new_tokens_cap:
        raise ApiError(400, f"this server allows at most {served.max_new_tokens_cap} new tokens per request "
                            f"(max_tokens={max_tokens})", "max_tokens")
    try:
        ask.params.checked(cfg.vocab_size)
    except EngineError as exc:
        first = str(exc).split()[0]
        raise ApiError(400, str(exc), first if first in SAMPLING_FIELDS else None) from None
    return max_tokens


class Flight:
    """One generation request in flight: submit it, then `await next()` for each token's Piece (None at the end)."""

    def __init__(self, service, served: Served, metrics: ServerMetrics, ask: Ask, ids: list[int], max_tokens: int,
                 arrival: float, index: int = 0):
        self.service, self.served, self.metrics, self.ask = service, served, metrics, ask
        self.index = index  # the choice this request answers (its prompt's place in the request's list)
        self.arrival = arrival  # perf_counter when the HTTP request came in
        self.n_prompt, self.max_tokens = len(ids), max_tokens
        self.request = Request(model=served.spec, prompt_ids=ids, max_new_tokens=max_tokens, params=ask.params,
                               chat=ask.kind == "chat")
        self.sink = _LoopSink(asyncio.get_running_loop())
        self.request.events = self.sink
        self.stream = TextStream(served.info.tokenizer, ask.stop)
        self.seq = Sequence(ids, max_tokens, ask.params, served.info.config.eos_token_ids)  # the engine's stop rule
        self.finish: str | None = None
        self._first = 0.0  # when the first token arrived here
        self._last = 0.0  # when the latest token arrived here
        self._kv_tokens = 0  # what this request adds to metrics.kv_tokens while it runs
        self._decode_s = 0.0  # the engine's decode steps so far
        self._prefill_s = 0.0
        self._closed = False

    def submit(self) -> None:
        try:
            self.service.submit(self.request)
        except QueueFull as exc:
            wait = max(1, math.ceil(exc.retry_after))
            raise ApiError(429, f"{exc} (about {wait} s)", None, "queue_full", {"Retry-After": str(wait)}) from None
        except EngineError as exc:
            raise ApiError(400, str(exc)) from None

    async def next(self) -> Piece | None:
        """The next token's piece, or None once the answer is complete."""
        while self.finish is None:
            event = await self.sink.queue.get()
            now = time.perf_counter()
            if isinstance(event, Started):
                self.metrics.queue.observe(event.queue_seconds)
                self._hold(self.n_prompt)
            elif isinstance(event, (FirstToken, Token)):
                return self._token(event, now)
            elif isinstance(event, Done):  # normally the last token already said it was last
                self.finish = FINISH.get(event.result.stop_reason, "length")
                return Piece(self.stream.finish(), -1, self.finish)
            elif isinstance(event, Failed):
                self._release()
                self.metrics.finished("abort" if event.cancelled else "error")
                raise ApiError(503 if event.cancelled else 500, f"the engine could not finish this request: {event.message}")
        return None

    def _token(self, event, now: float) -> Piece:
        if isinstance(event, FirstToken):
            self.metrics.ttft.observe(now - self.arrival)
            self.metrics.prompt_tokens.inc(self.n_prompt)
            self._prefill_s = event.prefill_seconds
            self._first = now
        else:
            self.metrics.itl.observe(now - self._last)
            self._decode_s += event.step.seconds
        self._last = now
        self._hold(1)
        self.metrics.generation_tokens.inc()
        ended = self.seq.append(event.token_id)
        text = self.stream.add(event.token_id)
        if self.stream.stopped:
            self.finish = "stop"
        elif ended is not None:
            self.finish = FINISH[ended]
        if self.finish is not None:
            text += self.stream.finish()
            self._complete(now)
        return Piece(text, event.token_id, self.finish)

    @property
    def ids(self) -> list[int]:
        """The answer's token ids so far."""
        return self.seq.output_ids

    def _hold(self, tokens: int) -> None:
        """This request's KV cache holds `tokens` more (the KV-cache usage gauge)."""
        if not self._closed:
            self._kv_tokens += tokens
            self.metrics.kv_tokens += tokens

    def _release(self) -> None:
        """The request is over: what it held leaves the KV-cache usage gauge, and nothing more is added."""
        self._closed = True
        self.metrics.kv_tokens -= self._kv_tokens
        self._kv_tokens = 0

    def _complete(self, now: float) -> None:
        self._release()
        if self.stream.stopped:  # a stop string ended it before the engine did: free its sequence
            self.service.cancel(self.request)
        m = self.metrics
        n_out = len(self.ids)
        m.prefill.observe(self._prefill_s)
        m.decode.observe(self._decode_s)
        m.tpot.observe((self._last - self._first) / (n_out - 1) if n_out > 1 else 0.0)  # as vLLM: 0 for one token
        m.e2e.observe(now - self.arrival)
        m.finished(self.finish)

    def close(self) -> None:
        """The consumer is done (normally or gone): an unfinished request is cancelled and counted as aborted."""
        if not self._closed:
            self._release()
            self.service.cancel(self.request)
            self.metrics.finished("abort")

    def text(self) -> str:
        """The whole answer: exactly what `python -m engine generate` prints unless a stop string cut it."""
        if self.stream.stopped:
            return self.stream.text
        return self.served.info.tokenizer.decode(self.ids, skip_special_tokens=True)
