"""Words and numbers of the Traffic lab: the workload from the page's inputs, the per-policy table, the findings.

Streamlit-free. Goodput (DistServe) counts the requests per second that met both SLOs; raw throughput counts all.
"""
from __future__ import annotations

import math

import pandas as pd

from engine.errors import EngineError
from engine.labs.traffic import NOT_YET, PolicyRun, TrafficRun
from engine.perfmodel.goodput import SLO, goodput, percentile, throughput
from engine.perfmodel.workload import PRESETS, Workload, preset, shaped
from ui import state

MS = 1000.0
PRESET_NAMES = list(PRESETS)
POLICY_CHOICES = {"queue": "queue", "batch": "continuous batching", "chunked": "+ chunked prefill",
                  "disaggregated": "disaggregated"}

INTRO = (
    "Many convoys at once. Requests arrive over time (a Poisson stream at a chosen rate, or all at once in a "
    "**burst**), each with its own prompt and answer length. The same arrival sequence (same seed) is replayed "
    "against each scheduling **policy**: *queue* serves one request at a time; *continuous batching* lets riders "
    "share the bridge's steps, but a joining prompt's prefill stops every rider; *chunked prefill* and "
    "*disaggregated* prefill/decode are the industry's two answers to that stall (here both workers share this one "
    "machine; disaggregation's gain needs a device per side). Each request is judged "
    "against your SLOs: **goodput** counts only the requests per second that met both, next to raw throughput.")
CANCEL_HELP = "Stops the policy being measured; nothing of an unfinished run is kept."
LANES_HELP = ("The two workers side by side: below, the prefill worker (the valley) runs one prompt at a time (orange) "
              "and packs its KV cache into a cart (purple); above, the decode worker (the bridge) unpacks each cart "
              "into its batch (purple) and steps the riders (blue). Each purple line is one cart crossing. The bridge's "
              "schedule never waits for a prompt, but here both workers run on this machine's same device and memory "
              "bus, so a prefill still slows the decode steps it overlaps; each side idles while it waits for the other.")
DISAGGREGATION_NOTE = (
    "**Disaggregated on one machine.** Here the prefill and decode workers are two processes on the same device (a "
    "CPU's cores, or one GPU): they share its arithmetic units and its one memory bus, so splitting them shows the "
    "mechanics (the KV cart crossing, a decode schedule no prompt interrupts) but cannot show the gain DistServe "
    "measured (Zhong et al., OSDI 2024). That gain needs a device per side: then the prompts' prefills no longer "
    "compete with the riders' decode steps for the same arithmetic units and memory bandwidth, and each pool can be "
    "sized and parallelised for its own SLO (TTFT for the valley, TPOT for the bridge), at the price of moving every "
    "request's KV cache between devices.")
CHUNKED_HELP = ("Each row is a request: grey while it waits, orange each chunk of its prompt, blue each decode step it "
                "rode. With chunked prefill a long prompt is cut into pieces that share the bridge's steps with the "
                "riders (hover a bar: who shared that step), so no rider waits for a whole prompt.")
HANDOVER_HELP = ("Disaggregated prefill/decode: each prefilled request's KV cache crosses from the prefill worker to "
                 "the decode worker in shared memory. The price per request: the bytes carried, the time to write and "
                 "read them, and the crossing (prefill end to joining the bridge's batch, waiting for a step included).")
TIMELINE_HELP = ("Each row is a request: grey while it waits, orange its prefill (the valley), blue each decode step "
                 "it rode (the bridge). Read a vertical line: the riders crossing together in that step; "
                 "a gap in a blue row is another request's prefill holding the bridge.")


def workload_from(name: str, burst: bool, rate: float, burstiness: float, prompt_tokens: int, prompt_spread: float,
                  output_tokens: int, output_spread: float, num_requests: int) -> Workload:
    """The page's inputs as a Workload (the same helper `engine measure --workload` uses: same values, same arrivals)."""
    return shaped(name, request_rate=math.inf if burst else float(rate), burstiness=float(burstiness),
                  prompt_tokens=int(prompt_tokens), prompt_spread=float(prompt_spread), output_tokens=int(output_tokens),
                  output_spread=float(output_spread), num_requests=int(num_requests))


def describe_workload(w: Workload) -> str:
    arrival = ("all at once (a burst)" if math.isinf(w.request_rate) else
               f"{w.request_rate:g} requests/s, burstiness {w.burstiness:g}" + (" (Poisson)" if w.burstiness == 1 else ""))
    return (f"{w.num_requests} requests of the '{w.name}' kind, {arrival}; prompts ~{w.prompt.mean} tokens "
            f"(spread {w.prompt.spread:g}), answers ~{w.output.mean} tokens (spread {w.output.spread:g})")


def slo_of(ttft_ms: float, tpot_ms: float) -> SLO:
    slo = SLO(float(ttft_ms) / MS, float(tpot_ms) / MS)
    slo.check()
    return slo


def policy_row(run: PolicyRun, slo: SLO) -> dict:
    if not run.available or not run.requests:
        return {"policy": run.label, "served": 0, "note": run.note}
    outs = run.outcomes()
    ttft = [r.ttft_s for r in run.requests if r.ttft_s is not None and not r.error]
    itl = [g for r in run.requests if not r.error for g in r.itl_s]
    good = sum(o.meets(slo) for o in outs)
    return {"policy": run.label, "served": sum(o.ttft_s is not None for o in outs),
            "TTFT p50 (ms)": percentile(ttft, 50) * MS, "TTFT p99 (ms)": percentile(ttft, 99) * MS,
            "ITL p50 (ms)": percentile(itl, 50) * MS, "ITL p99 (ms)": percentile(itl, 99) * MS,
            "throughput (req/s)": throughput(outs), "goodput (req/s)": goodput(outs, slo),
            "met both SLOs": f"{good}/{len(outs)}", "note": run.note}


def policy_table(result: TrafficRun, slo: SLO) -> pd.DataFrame:
    return pd.DataFrame([policy_row(p, slo) for p in result.policies]).round(2)


def findings(result: TrafficRun, slo: SLO) -> str:
    """What the table says, in words: which policy had the best goodput, and how far it was from raw throughput."""
    rows = [(p, policy_row(p, slo)) for p in result.policies if p.available and p.requests]
    lines = [f"Measured on {result.model} ({result.device}), the same {len(result.arrivals)} arrivals (seed "
             f"{result.seed}) for every policy; SLOs: TTFT ≤ {slo.ttft_s * MS:,.0f} ms, TPOT ≤ {slo.tpot_s * MS:,.0f} ms."]
    if rows:
        best, row = max(rows, key=lambda pr: pr[1]["goodput (req/s)"])
        lines.append(f"Best goodput: **{best.label}**, {row['goodput (req/s)']:.2f} requests/s meeting both SLOs "
                     f"({row['met both SLOs']} requests) of {row['throughput (req/s)']:.2f} requests/s served.")
    missing = [p.label for p in result.policies if not p.available and p.note.endswith(NOT_YET)]
    if missing:
        lines.append(f"Not in this engine yet: {', '.join(missing)}.")
    lines += [f"{p.label} could not run: {p.note}" for p in result.policies if not p.available and not p.note.endswith(NOT_YET)]
    if "disaggregated" in ran_policies(result):
        lines.append(DISAGGREGATION_NOTE)
    for p in result.policies:
        if p.handovers:
            hs = p.handovers
            lines.append(f"KV handover ({p.label}): {len(hs)} KV carts crossed between the workers, on average "
                         f"{sum(h.bytes for h in hs) / len(hs) / 1024:,.1f} KiB and "
                         f"{sum(h.crossing_s for h in hs) / len(hs) * MS:,.1f} ms each (write + read "
                         f"{sum(h.write_s + h.read_s for h in hs) / len(hs) * MS:,.2f} ms of it).")
    if result.cancelled:
        lines.append("The run was cancelled: the policies after the cancelled one were not measured.")
    return "  \n".join(lines)


def defaults() -> dict:
    """The page's starting inputs: a chat stream, queue against continuous batching, SLOs a 2-core CPU can meet."""
    return {state.TRAFFIC_PRESET: "chat", state.TRAFFIC_BURST: False, state.TRAFFIC_RATE: 2.0,
            state.TRAFFIC_BURSTINESS: 1.0, state.TRAFFIC_REQUESTS: 8, state.TRAFFIC_SEED: 0,
            state.TRAFFIC_POLICIES: ["queue", "batch"], state.TRAFFIC_SLO_TTFT: 2000.0, state.TRAFFIC_SLO_TPOT: 200.0,
            state.TRAFFIC_CHUNK: 256, **preset_inputs("chat")}


def preset_inputs(name: str) -> dict:
    """The length inputs of a preset (a new preset picked resets them)."""
    w = preset(name)
    return {state.TRAFFIC_PROMPT: w.prompt.mean, state.TRAFFIC_PROMPT_SPREAD: w.prompt.spread,
            state.TRAFFIC_OUTPUT: w.output.mean, state.TRAFFIC_OUTPUT_SPREAD: w.output.spread}


def check(name: str, policies: list[str], **inputs) -> str | None:
    """One line saying what is wrong with the page's inputs, or None."""
    if not policies:
        return "Pick at least one policy to compare."
    try:
        workload_from(name, **inputs)
    except EngineError as exc:
        return str(exc)
    return None


def workload_caption(name: str, lm, **inputs) -> str:
    return (f"{describe_workload(workload_from(name, **inputs))}. Every policy gets the same arrivals; "
            f"{lm.name} holds {lm.config.max_seq_len} tokens per request (prompt + answer).")


def ran_policies(result: TrafficRun) -> list[str]:
    return [p.policy for p in result.policies if p.available and p.requests]


def policy_run(result: TrafficRun, policy: str) -> PolicyRun:
    return next(p for p in result.policies if p.policy == policy)


def timeline_help(run: PolicyRun) -> str:
    if any(s.worker for s in run.steps):
        return LANES_HELP
    return CHUNKED_HELP if any(s.chunks and (s.riders or s.chunks[0][1] > 0) for s in run.steps) else TIMELINE_HELP


def handover_table(run: PolicyRun) -> pd.DataFrame:
    """One row per KV cart: which request, how many tokens and bytes, the copies and the whole crossing."""
    prompts = {r.index: r.prompt_tokens for r in run.requests}
    return pd.DataFrame([{"request": f"#{h.index + 1}", "prompt tokens": prompts.get(h.index, h.tokens),
                          "KV cache (KiB)": h.bytes / 1024, "write (ms)": h.write_s * MS, "read (ms)": h.read_s * MS,
                          "crossing (ms)": h.crossing_s * MS} for h in run.handovers]).round(2)


def handover_runs(result: TrafficRun) -> list[PolicyRun]:
    return [p for p in result.policies if p.handovers]
