"""Many convoys on many roads: a discrete-event simulation of a serving fleet, timed by a fitted step model.

N replicas each run the engine's scheduler rules (engine/serving/scheduling/continuous_batch.py and
scheduler.py), written here once:
  batch     continuous batching: between two decode steps the queue's head joins if a row is free, and is
            prefilled alone (every rider waits: the stall); then one decode step feeds every rider one token.
  chunked   chunked prefill with a token budget per step (vLLM's --max-num-batched-tokens, Sarathi-Serve):
            one joiner takes a row between two steps (the loop takes one request a step); each step feeds
            every decoding rider one token and fills the rest of the budget with prompt chunks, oldest
            first; a prompt's last chunk gives its first token.
  disagg    P prefill instances (each prompt alone, first come first served) hand the KV cache over a link
            of given bandwidth to D decode instances that batch continuously and never stall for a prefill:
            every arrived cache joins at the next step while rows are free (DistServe, Zhong et al. 2024;
            Splitwise, Patel et al. 2024).
A request goes to the replica (or pool member) with the fewest requests in hand. A one-token prompt has no
valley to cross: it takes a row and its token is fed like any rider's. A request with no output tokens ends
with its prefill (its TTFT is the prefill's end). Every duration comes from StepModel.seconds: the simulator
adds queueing and batching, nothing else. A split fleet's decode pool may run on another kind of card (its own step
model: Splitwise's idea). A small heapq event loop: no dependencies.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
from collections import deque

from engine.errors import EngineError
from engine.perfmodel.goodput import Outcome
from engine.perfmodel.step_model import StepModel
from engine.perfmodel.workload import Arrival

POLICIES = ("batch", "chunked", "disagg")


@dataclasses.dataclass(frozen=True)
class Fleet:
    policy: str = "batch"
    replicas: int = 1  # colocated instances (batch, chunked)
    prefill: int = 1  # disagg: prefill instances
    decode: int = 1  # disagg: decode instances
    max_batch: int = 8  # rows per instance (the engine's --max-batch)
    token_budget: int = 512  # chunked: tokens per step
    link_bytes_per_s: float = 25e9  # disagg: the KV handover's link

    def check(self) -> None:
        if self.policy not in POLICIES:
            raise EngineError(f"unknown fleet policy '{self.policy}'; use one of: {', '.join(POLICIES)}")
        counts = {"max batch": self.max_batch}
        counts.update({"prefill instances": self.prefill, "decode instances": self.decode} if self.policy == "disagg"
                      else {"replicas": self.replicas})
        for name, value in counts.items():
            low = 0 if name.endswith("instances") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise EngineError(f"the number of {name} must be a whole number >= {low}, not {value!r}")
        if self.policy == "disagg" and self.prefill + self.decode < 1:
            raise EngineError("a fleet of 0 cards serves nothing: give it at least one instance")
        if self.policy == "chunked" and (not isinstance(self.token_budget, int) or self.token_budget < self.max_batch):
            raise EngineError(f"the chunked token budget must be a whole number >= max batch ({self.max_batch}), "
                              f"not {self.token_budget!r}")
        if self.policy == "disagg" and not (self.link_bytes_per_s > 0 and math.isfinite(self.link_bytes_per_s)):
            raise EngineError(f"the handover link's bandwidth must be a finite number of bytes/s > 0, "
                              f"not {self.link_bytes_per_s!r}")

    @property
    def cards(self) -> int:
        return self.prefill + self.decode if self.policy == "disagg" else self.replicas


class _Req:
    __slots__ = ("arrival", "at", "prompt", "output", "done_prompt", "made", "first", "end", "kv", "where")

    def __init__(self, a: Arrival):
        self.arrival, self.at, self.prompt, self.output = a, a.at_s, a.prompt_tokens, a.output_tokens
        self.done_prompt = 0 if a.prompt_tokens > 1 else a.prompt_tokens  # a one-token prompt needs no valley
        self.made, self.first, self.end, self.kv, self.where = 0, None, None, 0, None


@dataclasses.dataclass
class SimResult:
    outcomes: list[Outcome]
    fleet: Fleet
    busy_s: dict  # pool name -> seconds its instances spent in steps, summed
    stage_s: dict  # "prefill" / "decode" -> step seconds owed to each stage
    instances: dict  # pool name -> how many
    handover_s: float = 0.0  # disagg: link seconds, summed
    handover_bytes: float = 0.0
    prompt_tokens: int = 0  # all requests' prompts, summed

    @property
    def span_s(self) -> float:
        return max(o.finished_s for o in self.outcomes) - min(o.arrived_s for o in self.outcomes)

    def utilisation(self) -> dict:
        """Fraction of each pool's card-time spent in steps."""
        span = self.span_s
        return {k: self.busy_s[k] / (n * span) if n and span > 0 else 0.0 for k, n in self.instances.items()}


class _Instance:
    """One card running the scheduler's rules for its pool; `stage` says what its steps do."""

    def __init__(self, sim: _Sim, pool: str):
        self.sim, self.pool = sim, pool
        self.model = sim.decode_model if pool == "decode" and sim.decode_model is not None else sim.model
        self.waiting: deque[_Req] = deque()
        self.rows: list[_Req] = []
        self.busy = False
        self.after_admit = False  # batch: the engine's loop steps once after every admit
        self.held = 0  # requests routed here and not yet finished or handed over

    def kick(self, now: float) -> None:
        if self.busy:
            return
        plan = self._plan()
        if plan is None:
            return
        seconds, finish = plan
        self.busy = True
        self.sim.busy[self.pool] += seconds
        self.sim.later(now + seconds, finish)

    def _plan(self):
        sim, model = self.sim, self.model
        policy = sim.fleet.policy
        room = len(self.rows) < sim.fleet.max_batch
        if policy == "chunked" or (self.pool == "decode" and policy == "disagg"):
            joins = 1 if policy == "chunked" else sim.fleet.max_batch  # the engine's loop takes one request a step
            while self.waiting and len(self.rows) < sim.fleet.max_batch and joins:  # a join is no pass of its own
                self.rows.append(self.waiting.popleft())
                joins -= 1
            return self._mixed() if self.rows else None
        if self.waiting and room and not (self.after_admit and self.rows) and self.waiting[0].done_prompt < self.waiting[0].prompt:
            req = self.waiting.popleft()  # the head is prefilled alone; everyone else waits for it
            seconds = model.seconds(req.prompt, req.prompt, pairs=req.prompt * (req.prompt + 1) / 2, rows=1)
            sim.stage["prefill"] += seconds
            self.after_admit = self.pool != "prefill"
            return seconds, lambda t: self._prefilled(req, t)
        while self.waiting and len(self.rows) < sim.fleet.max_batch and self.waiting[0].done_prompt >= self.waiting[0].prompt:
            self.rows.append(self.waiting.popleft())  # a one-token prompt takes a row between steps
        self.after_admit = False
        return self._mixed() if self.rows else None

    def _prefilled(self, req: _Req, t: float) -> None:
        req.done_prompt = req.kv = req.prompt
        self.sim.token(req, t)
        self.busy = False
        if req.end is None:
            if self.pool == "prefill":
                self.sim.hand_over(self, req, t)
            else:
                self.rows.append(req)
        self.kick(t)

    def _mixed(self):
        """One step: a token for every decoding row, the rest of the budget (chunked) to prompts, oldest first."""
        model, budget = self.model, self.sim.fleet.token_budget
        decoding = [r for r in self.rows if r.done_prompt >= r.prompt]
        left = budget - len(decoding)
        chunks = []
        for r in self.rows:
            if r.done_prompt < r.prompt and left > 0:
                take = min(r.prompt - r.done_prompt, left)
                chunks.append((r, take))
                left -= take
        tokens = len(decoding) + sum(c for _, c in chunks)
        kv_after = sum(r.kv + 1 for r in decoding) + sum(r.done_prompt + c for r, c in chunks)
        # query-key pairs: a decode row's token attends its whole cache; a chunk's tokens the prompt so far + the chunk
        pairs = sum(r.kv + 1 for r in decoding) + sum(c * (r.done_prompt + (c + 1) / 2) for r, c in chunks)
        rows = len(decoding) + sum(r.done_prompt + c >= r.prompt for r, c in chunks)  # rows that emit a token
        seconds = model.seconds(tokens, kv_after, pairs=pairs, rows=rows)
        pre = model.split(tokens, kv_after, sum(c for _, c in chunks), sum(r.done_prompt + c for r, c in chunks),
                          pairs=pairs, rows=rows)
        self.sim.stage["prefill"] += pre
        self.sim.stage["decode"] += seconds - pre
        return seconds, lambda t: self._stepped(decoding, chunks, t)

    def _stepped(self, decoding: list[_Req], chunks: list, t: float) -> None:
        for r in decoding:
            r.kv += 1
            self.sim.token(r, t)
        for r, take in chunks:
            r.done_prompt += take
            r.kv = r.done_prompt
            if r.done_prompt >= r.prompt:
                self.sim.token(r, t)  # the last chunk's logits give the first token
        self.rows = [r for r in self.rows if r.end is None]
        self.busy = False
        self.kick(t)


class _Sim:
    def __init__(self, model, fleet: Fleet, decode_model=None):
        self.model, self.fleet, self.decode_model = model, fleet, decode_model
        self.events: list = []
        self.serial = 0
        self.busy: dict = {}
        self.stage = {"prefill": 0.0, "decode": 0.0}
        self.pools: dict[str, list[_Instance]] = {}
        sizes = {"prefill": fleet.prefill, "decode": fleet.decode} if fleet.policy == "disagg" \
            else {"colocated": fleet.replicas}
        for pool, n in sizes.items():
            self.pools[pool] = [_Instance(self, pool) for _ in range(n)]
            self.busy[pool] = 0.0
        self.links: list[float] = [0.0] * fleet.prefill  # disagg: when each prefill card's link is free
        self.handover_s = self.handover_bytes = 0.0

    def later(self, t: float, fn) -> None:
        self.serial += 1
        heapq.heappush(self.events, (t, self.serial, fn))

    def route(self, pool: str, req: _Req, t: float) -> None:
        members = self.pools[pool]
        if not members:
            raise EngineError(f"a request needs the {pool} pool, which has 0 instances: give it at least one")
        inst = min(members, key=lambda member: member.held)  # the fewest requests in hand
        inst.held += 1
        req.where = inst
        inst.waiting.append(req)
        inst.kick(t)

    def arrive(self, req: _Req, t: float) -> None:
        if self.fleet.policy != "disagg":
            self.route("colocated", req, t)
        elif req.done_prompt < req.prompt:
            self.route("prefill", req, t)
        else:
            self.route("decode", req, t)  # nothing to prefill: straight onto the bridge

    def hand_over(self, inst: _Instance, req: _Req, t: float) -> None:
        """The KV cache crosses to the decode pool over this prefill card's link (one cart at a time)."""
        inst.held -= 1
        i = self.pools["prefill"].index(inst)
        nbytes = req.kv * inst.model.kv_bytes_per_token
        seconds = nbytes / self.fleet.link_bytes_per_s
        start = max(t, self.links[i])
        self.links[i] = start + seconds
        self.handover_s += seconds
        self.handover_bytes += nbytes
        self.later(start + seconds, lambda when: self.route("decode", req, when))

    def token(self, req: _Req, t: float) -> None:
        if req.first is None:
            req.first = t
        req.made += 1
        if req.made >= req.output:
            req.end = t
            req.where.held -= 1

    def run(self, reqs: list[_Req]) -> None:
        for r in reqs:
            if r.end is None:
                self.later(r.at, lambda t, r=r: self.arrive(r, t))
        while self.events:
            t, _, fn = heapq.heappop(self.events)
            fn(t)


def simulate(arrivals: list[Arrival], model: StepModel, fleet: Fleet, decode_model: StepModel | None = None) -> SimResult:
    """Run the workload's requests through the fleet; every request ends (the sim has no failures). `decode_model`:
    a disaggregated fleet's decode cards, when they are another kind of card than the prefill ones (Splitwise)."""
    fleet.check()
    model.check()
    if decode_model is not None:
        decode_model.check()
        if fleet.policy != "disagg":
            raise EngineError("a second kind of card needs a split fleet: the decode pool of the 'disagg' policy")
        if decode_model.kv_bytes_per_token != model.kv_bytes_per_token:
            raise EngineError("the prefill and decode cards must serve the same model (their KV caches differ)")
    if not arrivals:
        raise EngineError("the simulation needs at least one request")
    reqs = [_Req(a) for a in arrivals]
    for r in reqs:
        if r.output == 0 and r.done_prompt >= r.prompt:
            r.first = r.end = r.at  # nothing to compute at all
        elif r.output == 0:
            r.made = -1  # ends with its prefill: token() counts the prompt's end, making it 0
    sim = _Sim(model, fleet, decode_model)
    sim.run(reqs)
    outcomes = []
    for r in reqs:
        made = max(r.made, 0)
        tpot = (r.end - r.first) / (made - 1) if made > 1 else None
        outcomes.append(Outcome(r.at, r.first - r.at, tpot, r.end, made))
    instances = {k: len(v) for k, v in sim.pools.items()}
    return SimResult(outcomes, fleet, sim.busy, sim.stage, instances, sim.handover_s, sim.handover_bytes,
                     sum(a.prompt_tokens for a in arrivals))
