"""Is the fleet simulator right? Fit its step model on the real engine's steps, then run the same traffic on both.

Three stages, all on this machine: (1) calibrate — bursts of requests through the real Scheduler (batch mode, in
this process) record prefill passes and decode steps (the gaps the riders saw, stalls excluded), and
engine/perfmodel/step_model.py fits fixed + per-token + per-KV-byte seconds to them; (2) replay — a workload's
arrival sequence is sent to the real engine at its real times and to the simulator with the fitted model;
(3) compare p50/p90 TTFT and TPOT and goodput. Only what the engine measured enters: TTFT is the queue time
plus the prefill the engine timed, TPOT its decode gaps. A difference over 20 % is reported, not hidden.
"""
from __future__ import annotations

import dataclasses
import random
import time

from engine.core.sampling_params import SamplingParams
from engine.perfmodel.fleet_sim import Fleet, simulate
from engine.perfmodel.goodput import SLO, Outcome, goodput, percentile, span_s
from engine.perfmodel.step_model import Step, StepFit, fit_steps
from engine.perfmodel.workload import PRESETS, Arrival, arrivals
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import ModelSpec, Request, result_of

TOLERANCE = 0.20  # the bar: simulator within 20 % of the measured engine
METRICS = ("TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90", "goodput", "span")  # span: first arrival to last end


@dataclasses.dataclass
class EngineRun:
    outcomes: list[Outcome]
    traces: list


@dataclasses.dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    engine: float
    sim: float

    @property
    def error(self) -> float:
        """(simulated - measured) / measured; NaN when the measured value is 0 or missing."""
        return (self.sim - self.engine) / self.engine if self.engine else float("nan")

    @property
    def within(self) -> bool:
        return abs(self.error) <= TOLERANCE


def run_engine(scheduler: Scheduler, spec: ModelSpec, vocab: int, arrivals: list[Arrival], seed: int = 0) -> EngineRun:
    """Send each request at its arrival time (from now) to a started batch-mode Scheduler; wait for all."""
    rng = random.Random(seed)
    params = SamplingParams(ignore_eos=True)  # exact output lengths, as the simulator assumes
    start = time.perf_counter()
    sent = []
    for a in arrivals:
        delay = start + a.at_s - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        ids = [rng.randrange(3, vocab) for _ in range(max(a.prompt_tokens, 1))]
        sent.append(scheduler.submit(Request(model=spec, prompt_ids=ids, max_new_tokens=max(a.output_tokens, 1),
                                             params=params)))
    traces = [result_of(r, timeout=600) for r in sent]
    outcomes = []
    for req, trace in zip(sent, traces):
        arrived = req.arrival - start
        ttft = trace.queue_seconds + trace.prefill_seconds
        decode = sum(s.seconds for s in trace.steps)
        tpot = decode / len(trace.steps) if trace.steps else None
        outcomes.append(Outcome(arrived, ttft, tpot, arrived + ttft + decode, trace.n_output))
    return EngineRun(outcomes, traces)


def steps_of(traces) -> list[Step]:
    """The engine's steps from its traces: every prefill, and every decode gap that no other work stalled."""
    steps = []
    for trace in traces:
        bpt = trace.kv_bytes_per_token
        steps.append(Step(trace.n_prompt, trace.n_prompt * bpt, trace.prefill_seconds, "prefill"))
        steps += [Step(s.riders, s.kv_bytes, s.seconds) for s in trace.steps if s.stall_seconds == 0]
    return steps


LONE_S = 2.0  # s the first request decodes alone before the bursts: a lone sequence's steps may take a path of their own


def calibration(context: int, max_batch: int) -> list[Arrival]:
    """One request alone (LONE_S before the rest), then bursts (all at once, one burst after the other) of
    1..max_batch requests, prompts short to long."""
    longest = max(16, min(512, context // 2))
    lengths = [max(4, longest >> k) for k in range(5)][::-1]  # e.g. 32 .. 512
    out, t, n = [Arrival(0.0, lengths[0], 24)], LONE_S, 1
    while n <= max_batch:
        for i in range(n):
            out.append(Arrival(t, lengths[(i + n) % len(lengths)], 24))
        t += 1e-3  # the next burst queues behind this one
        n *= 2
    return out


def calibrate(scheduler: Scheduler, spec: ModelSpec, vocab: int, context: int, max_batch: int) -> StepFit:
    run = run_engine(scheduler, spec, vocab, calibration(context, max_batch), seed=1)
    bpt = run.traces[0].kv_bytes_per_token
    return fit_steps(steps_of(run.traces), bpt, f"measured on this machine ({spec.name}, {spec.device})")


def compare(engine: EngineRun, arrivals: list[Arrival], fit: StepFit, max_batch: int, slo: SLO,
            name: str) -> list[Row]:
    """The simulator on the same arrivals (outputs of 0 run as 1, as the engine does) beside the engine."""
    same = [dataclasses.replace(a, output_tokens=max(a.output_tokens, 1)) for a in arrivals]
    sim = simulate(same, fit.model, Fleet("batch", replicas=1, max_batch=max_batch)).outcomes
    return [Row(name, metric, _metric(engine.outcomes, metric, slo), _metric(sim, metric, slo)) for metric in METRICS]


def _metric(outcomes: list[Outcome], metric: str, slo: SLO) -> float:
    if metric == "goodput":
        return goodput(outcomes, slo)
    if metric == "span":
        return span_s(outcomes)
    what, q = metric.split(" p")
    values = [o.ttft_s if what == "TTFT" else o.tpot_s for o in outcomes]
    return percentile(values, float(q))


def traffic(fit: StepFit, context: int, max_batch: int, n: int = 16, load: float = 0.5,
            presets: tuple[str, ...] = tuple(PRESETS), seed: int = 0) -> dict[str, list[Arrival]]:
    """The Traffic lab's presets cut to fit the model's context, at `load` x this engine's capacity (by the fit)."""
    out = {}
    for name in presets:
        work = PRESETS[name]
        scale = min(1.0, (context - 1) / (work.prompt.high + work.output.high))
        prompt = dataclasses.replace(work.prompt, mean=max(1, round(work.prompt.mean * scale)),
                                     high=max(1, int(work.prompt.high * scale)))
        output = dataclasses.replace(work.output, mean=max(1, round(work.output.mean * scale)),
                                     high=max(1, int(work.output.high * scale)))
        m, b = fit.model, max_batch
        per_request = (m.seconds(prompt.mean, prompt.mean)
                       + output.mean * m.seconds(b, b * (prompt.mean + output.mean // 2)) / b)
        work = dataclasses.replace(work, prompt=prompt, output=output, num_requests=n, request_rate=load / per_request)
        out[name] = arrivals(work, seed)
    return out


def check(model: str = "tiny-llama", slo: SLO | None = None, max_batch: int = 4, n: int = 16, load: float = 0.5,
          presets: tuple[str, ...] = tuple(PRESETS), device: str = "cpu", progress=None) -> tuple[StepFit, list[Row]]:
    """For each of the Traffic lab's presets: calibrate on the real engine (separate bursts just before: the fit never
    sees the replayed steps, and a shared machine's speed drifts), then replay it on the engine and the simulator.
    Returns the fastest calibration's fit (see `fastest`) and the rows, each made with the fit just before it."""
    spec = ModelSpec(model, device, "float32")
    scheduler = Scheduler("batch", max_batch=max_batch, max_queue=4096).start()
    try:
        warm = Request(model=spec, prompt_ids=[5, 6, 7], max_new_tokens=2)  # loads the model; not timed
        lm_trace = result_of(scheduler.submit(warm), timeout=600)
        vocab, context = lm_trace.config["vocab_size"], lm_trace.config["max_seq_len"]
        rows, fits = [], []
        for name in presets:
            if progress:
                progress(f"calibrating before '{name}': bursts of requests through the real engine")
            fit = calibrate(scheduler, spec, vocab, context, max_batch)  # the machine's speed now, not an hour ago
            fits.append(fit)
            reqs = traffic(fit, context, max_batch, n, load, (name,))[name]
            if progress:
                progress(f"replaying '{name}' ({len(reqs)} requests) on the engine and the simulator")
            measured = run_engine(scheduler, spec, vocab, reqs)
            rows += compare(measured, reqs, fit, max_batch, slo or _slo_for(measured), name)
        return fastest(fits), rows
    finally:
        scheduler.stop()


def fastest(fits: list[StepFit]) -> StepFit:
    """Of identical calibrations, the one that took least time: the machine's own speed (the others lost cores to
    other programs), as this machine's peaks are the best of repeats (engine/labs/hardware.py)."""
    best = min(fits, key=lambda f: sum(s.seconds for s in f.steps))
    if len(fits) == 1:
        return best
    return dataclasses.replace(best, model=dataclasses.replace(
        best.model, source=f"{best.model.source}, the fastest of {len(fits)} identical calibrations"))


def check_in_sample(model: str, arrivals: list[Arrival], max_batch: int = 4, slo: SLO | None = None,
                    device: str = "cpu") -> tuple[StepFit, list[Row]]:
    """One replay, the step model fitted on that replay's own steps: checks the simulator's queueing and batching
    rules against the engine with the machine's speed at that moment (a busy shared machine drifts between runs)."""
    spec = ModelSpec(model, device, "float32")
    scheduler = Scheduler("batch", max_batch=max_batch, max_queue=4096).start()
    try:
        warm = result_of(scheduler.submit(Request(model=spec, prompt_ids=[5, 6, 7], max_new_tokens=2)), timeout=600)
        measured = run_engine(scheduler, spec, warm.config["vocab_size"], arrivals)
    finally:
        scheduler.stop()
    fit = fit_steps(steps_of(measured.traces), warm.kv_bytes_per_token, f"measured on this machine ({model}, replay)")
    return fit, compare(measured, arrivals, fit, max_batch, slo or _slo_for(measured), "replay")


def _slo_for(run: EngineRun) -> SLO:
    """Without given SLOs: 1.5 x the engine's own median TTFT and TPOT, so goodput is neither 0 nor everything."""
    ttft = percentile([o.ttft_s for o in run.outcomes], 50)
    tpot = percentile([o.tpot_s for o in run.outcomes], 50)
    return SLO(1.5 * ttft, 1.5 * tpot if tpot == tpot else 1.0)
