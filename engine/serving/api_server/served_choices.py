"""One HTTP request's choices: a Flight per prompt (a completion may carry a list), read as their tokens come.

OpenAI's completions take `prompt: ["a", "b"]` and answer each as a choice with its `index`. Here each prompt is a
request of its own in the scheduler (queued one after another in queue mode, sharing decode steps in batch mode, as
vLLM turns a list into separate engine requests), and this merges their pieces for the stream. One prompt, the
usual case, is read straight from its flight: no task or queue between the scheduler and the client.
"""
from __future__ import annotations

import asyncio

from engine.serving.api_server.openai_schema import Answer, ApiError
from engine.serving.api_server.request_flight import Flight, Piece


class Choices:
    """`await next()` -> (flight, piece) in arrival order across the flights, None once every one has ended."""

    def __init__(self, flights: list[Flight]):
        self.flights = flights
        self.ask, self.served = flights[0].ask, flights[0].served
        self._queue: asyncio.Queue | None = None
        self._tasks: list[asyncio.Future] = []
        self._left = len(flights)

    def submit(self) -> None:
        """Queue every prompt; if one is refused (a full queue: 429), those already queued are cancelled."""
        for i, flight in enumerate(self.flights):
            try:
                flight.submit()
            except ApiError:
                for queued in self.flights[:i]:
                    queued.close()
                raise
        if len(self.flights) > 1:
            self._queue = asyncio.Queue()
            self._tasks = [asyncio.ensure_future(self._pump(f)) for f in self.flights]

    async def _pump(self, flight: Flight) -> None:
        try:
            while (piece := await flight.next()) is not None:
                self._queue.put_nowait((flight, piece))
            self._queue.put_nowait((flight, None))
        except ApiError as exc:
            self._queue.put_nowait((flight, exc))

    async def next(self) -> tuple[Flight, Piece] | None:
        if self._queue is None:  # one prompt
            flight = self.flights[0]
            piece = await flight.next()
            return None if piece is None else (flight, piece)
        while self._left:
            flight, got = await self._queue.get()
            if isinstance(got, ApiError):
                raise got
            if got is None:
                self._left -= 1
                continue
            return flight, got
        return None

    def close(self) -> None:
        """Done reading (normally, or the client left): unfinished flights are cancelled in the scheduler."""
        for task in self._tasks:
            task.cancel()
        for flight in self.flights:
            flight.close()

    def usage(self) -> tuple[int, int]:
        """(prompt tokens, output tokens) over every choice."""
        return sum(f.n_prompt for f in self.flights), sum(len(f.ids) for f in self.flights)

    def answers(self) -> list[Answer]:
        return [Answer(f.text(), f.finish, f.n_prompt, f.ids) for f in self.flights]
