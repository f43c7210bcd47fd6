"""`python -m engine measure --request-rate R`: traffic against any OpenAI-compatible server, as vLLM's serving benchmark sends it.

A Workload (engine/perfmodel/workload.py: `--request-rate`, `--burstiness`, length distributions or a preset)
becomes one fixed arrival list (`--seed`); each request is sent at its moment on its own connection, whatever
the others are doing (an open loop: a slow server makes requests pile up, as real users would). Prompts have
exactly the drawn number of tokens (the server's /tokenize when it has one) and each starts with its own tag,
so no prefix cache helps; `ignore_eos` makes the drawn number of tokens come. Every request becomes the same
JSON record as `measure` writes today, plus its arrival; goodput (DistServe) is counted against `--slo-*`.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.perfmodel.goodput import SLO, Outcome, goodput, percentile, throughput
from engine.perfmodel.workload import Arrival, Workload, arrivals
from engine.serving.client.openai_client import Client, scrape
from engine.serving.client.server_benchmark import Plan, Prompts, Sender, build_prompts, discover, record, server_deltas

MAX_TRAFFIC_REQUESTS = 1000
MS = 1000.0


@dataclass
class TrafficPlan:
    url: str
    workload: Workload
    seed: int = 0
    model: str | None = None
    warmup: int = 1
    timeout: float = 120.0
    api_key: str = ""
    slo: SLO = field(default_factory=lambda: SLO(2.0, 0.2))

    def check(self) -> TrafficPlan:
        self.workload.check()
        if self.workload.num_requests > MAX_TRAFFIC_REQUESTS:
            raise EngineError(f"--requests must be from 1 to {MAX_TRAFFIC_REQUESTS:,} (got {self.workload.num_requests})")
        if not 0 <= self.warmup <= 100:
            raise EngineError(f"--warmup must be from 0 to 100 (got {self.warmup})")
        if not self.timeout > 0:
            raise EngineError(f"--timeout must be positive (got {self.timeout})")
        self.slo.check()
        return self


def _prompts(client: Client, model: str, plan: list[Arrival], warmup: int) -> Prompts:
    """One prompt per request (the warm-ups first, with the first arrival's length), each of its exact length."""
    lengths = [plan[0].prompt_tokens] * warmup + [a.prompt_tokens for a in plan]
    by_length: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by_length.setdefault(n, []).append(i)
    ids: list = [None] * len(lengths)
    texts: list = [None] * len(lengths)
    source = "server"
    for n, where in by_length.items():
        got = build_prompts(client, model, n, len(where), False)
        source = got.tokenizer
        for k, i in enumerate(where):
            ids[i] = got.ids[k]
            if got.texts:
                texts[i] = got.texts[k]
    return Prompts(ids, source, texts if source == "ours" else [])


def run_traffic(tplan: TrafficPlan, on_record=None) -> tuple[list[dict], dict]:
    """Send the workload; returns (records in request order, facts). `on_record(rec)` as each request ends."""
    tplan.check()
    client = Client(tplan.url, tplan.timeout, tplan.api_key)
    model = discover(client, tplan.model)
    plan = arrivals(tplan.workload, tplan.seed)
    prompts = _prompts(client, model, plan, tplan.warmup)
    sender = Sender(client, model, prompts)
    for i in range(tplan.warmup):
        sender.send(i, min(plan[0].output_tokens, 4))
    n = len(plan)
    records: list[dict | None] = [None] * n
    errors: list[str] = []
    lock = threading.Lock()
    start_metrics = scrape(client, model)
    t0 = time.perf_counter() + 0.05  # a moment to start the threads

    def one(k: int) -> None:
        a, i = plan[k], tplan.warmup + k
        time.sleep(max(0.0, t0 + a.at_s - time.perf_counter()))
        try:
            got, asked = sender.send(i, a.output_tokens)
        except EngineError as exc:
            with lock:
                errors.append(f"request {k + 1}: {exc}")
            return
        shim = Plan(tplan.url, a.prompt_tokens, a.output_tokens, model, n, n, False, tplan.warmup)
        rec = record(shim, client, model, prompts, i, got, None, asked)
        rec.update(arrived_s=a.at_s, sent_s=got.sent_at - t0, workload=tplan.workload.name, seed=tplan.seed,
                   request_rate=tplan.workload.request_rate, burstiness=tplan.workload.burstiness)
        records[k] = rec
        if on_record is not None:
            with lock:
                on_record(rec)

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise EngineError(f"{len(errors)} of {n} requests failed; the first: {sorted(errors)[0]}")
    run_metrics = server_deltas(start_metrics, scrape(client, model), "run", n)
    for rec in records:
        rec["server_metrics"] = run_metrics
    facts = {"url": client.target.url, "model": model, "tokenizer": prompts.tokenizer, "ignore_eos": sender.extensions,
             "server_metrics": run_metrics, "warmup": tplan.warmup, "concurrency": n, "workload": tplan.workload,
             "seed": tplan.seed, "slo": tplan.slo}
    return records, facts


def outcomes(records: list[dict]) -> list[Outcome]:
    """Each record as an Outcome: arrival = when it was sent (seconds from the start), TTFT and TPOT as measured."""
    return [Outcome(r["sent_s"], r["prefill_seconds"], r["tpot_seconds"], r["sent_s"] + r["e2e_seconds"],
                    r["output_tokens"]) for r in records]


def traffic_summary(records: list[dict], slo: SLO) -> dict:
    """p50/p99 TTFT and ITL (seconds), throughput and goodput (requests/s) of one traffic run."""
    ttft = [r["prefill_seconds"] for r in records]
    itl = [s["seconds"] for r in records for s in r["steps"]]
    outs = outcomes(records)
    return {"requests": len(records), "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
            "itl_p50": percentile(itl, 50), "itl_p99": percentile(itl, 99), "throughput": throughput(outs),
            "goodput": goodput(outs, slo), "good": sum(o.meets(slo) for o in outs)}


def format_traffic(records: list[dict], facts: dict) -> str:
    w, slo = facts["workload"], facts["slo"]
    s = traffic_summary(records, slo)
    rate = "a burst (all at once)" if math.isinf(w.request_rate) else f"{w.request_rate:g} requests/s"
    return "\n".join([
        f"{facts['url']} · model {facts['model']} · {s['requests']} requests, {rate}, burstiness {w.burstiness:g}, "
        f"seed {facts['seed']}" + ("" if facts["ignore_eos"] else " (the server refused ignore_eos)"),
        f"prompts ~{w.prompt.mean} tokens (spread {w.prompt.spread:g}), outputs ~{w.output.mean} (spread {w.output.spread:g})",
        f"TTFT p50 / p99  {s['ttft_p50'] * MS:,.1f} / {s['ttft_p99'] * MS:,.1f} ms",
        f"ITL  p50 / p99  {s['itl_p50'] * MS:,.1f} / {s['itl_p99'] * MS:,.1f} ms",
        f"throughput {s['throughput']:.2f} requests/s; goodput {s['goodput']:.2f} requests/s ({s['good']}/{s['requests']} "
        f"met TTFT <= {slo.ttft_s * MS:,.0f} ms and TPOT <= {slo.tpot_s * MS:,.0f} ms)"])
