"""Benchmark: disaggregated prefill and decode against the colocated batch engine, on this machine.

Measures (1) the cart: KV bytes and milliseconds handed from the prefill worker to the decode worker for prompts
of 128/512/1024 tokens; (2) mixed traffic: riders decoding when a long prompt arrives, the riders' worst
inter-token gap (ITL, measured where the consumer receives the tokens) and the joiner's TTFT, disaggregated vs
the colocated batch engine with the same threads in all; (3) what an idle side costs: decode-only throughput
(the valley's core idles) and each worker's busy share during the mixed run. Prints markdown tables; --json saves
everything. Share the machine fairly: run under `flock /tmp/tb/bench.lock .venv/bin/python -m benchmarks.disaggregated`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

from engine.core.sampling_params import SamplingParams
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.scheduling.lab_jobs import MODEL_DESCRIBE
from engine.serving.scheduling.work import FirstToken, Job, ModelSpec, Request, Token, drain, result_of
from engine.serving.scheduling.worker import LocalService, ServiceOptions, make_service

GREEDY = SamplingParams(ignore_eos=True)
VOCAB, CONTEXT = [40000], [2048]  # ids below the model's vocabulary, lengths within its context (set once loaded)


def prompt(n: int, salt: int = 0) -> list[int]:
    return [(i * 7919 + salt * 104729) % (VOCAB[0] - 100) + 100 for i in range(n)]


class Watched:
    """A request whose events a thread records with their arrival times (what a client would see)."""

    def __init__(self, service, req: Request):
        self.req, self.times, self.final = req, [], None
        self.done = threading.Event()
        service.submit(req)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        for event in drain(self.req, 600):
            if isinstance(event, (FirstToken, Token)):
                self.times.append(time.perf_counter())
            self.final = event
        self.done.set()


def service_for(mode: str, spec: ModelSpec, threads: int, max_batch: int, long: int):
    options = ServiceOptions(mode=mode, threads=threads, max_batch=max_batch, preload=spec)
    # the engine outside this process's GIL either way: batch in the dashboard's engine process, disaggregated
    # with its two worker processes (the coordinator stays here, so its timeline can be read)
    service = LocalService(options) if mode == "disaggregated" else make_service(options, "process")
    info = result_of(service.submit(Job(model=spec, name=MODEL_DESCRIBE.name, args=(spec,))), 600)
    VOCAB[0], CONTEXT[0] = min(40000, info.config.vocab_size), min(2048, info.config.max_seq_len)
    for n in (32, long // 2):  # warm both sides (the first forward passes pay one-time costs)
        result_of(service.submit(Request(model=spec, prompt_ids=prompt(n, 99), max_new_tokens=4, params=GREEDY)), 600)
    return service


def carts(service, spec: ModelSpec, lengths: list[int], repeats: int) -> list[dict]:
    rows = []
    for n in lengths:
        runs = [result_of(service.submit(Request(model=spec, prompt_ids=prompt(n, r), max_new_tokens=2, params=GREEDY)), 600)
                for r in range(repeats)]
        ms = {key: 1e3 * statistics.median(t.settings["handover"][key] for t in runs)
              for key in ("write_seconds", "read_seconds", "crossing_seconds")}
        rows.append(dict(tokens=n, bytes=runs[0].settings["handover"]["bytes"], write_ms=ms["write_seconds"],
                         read_ms=ms["read_seconds"], crossing_ms=ms["crossing_seconds"],
                         prefill_ms=1e3 * statistics.median(t.prefill_seconds for t in runs)))
    return rows


def mixed(service, spec: ModelSpec, riders: int, rider_prompt: int, long: int, settle_tokens: int) -> dict:
    """`riders` decode; once each has `settle_tokens` tokens a `long`-token prompt arrives; the riders' gaps then."""
    watched = [Watched(service, Request(model=spec, prompt_ids=prompt(rider_prompt, i),
                                        max_new_tokens=CONTEXT[0] - rider_prompt,
                                        params=GREEDY)) for i in range(riders)]
    def wait_for(counts):
        while any(len(w.times) < n for w, n in zip(watched, counts)):
            if any(w.done.is_set() for w in watched):
                raise SystemExit(f"a rider ended before the long prompt came: {[w.final for w in watched]}")
            time.sleep(0.005)

    wait_for([1] * riders)
    all_in = time.perf_counter()  # every rider has joined: from here on only decode steps (until the long prompt)
    wait_for([len(w.times) + settle_tokens for w in watched])
    before = [len(w.times) for w in watched]
    arrival = time.perf_counter()
    joiner = Watched(service, Request(model=spec, prompt_ids=prompt(long, 7), max_new_tokens=8, params=GREEDY))
    joiner.done.wait(600)
    time.sleep(0.5)  # the riders' gaps just after the join count too
    end = time.perf_counter()
    for w in watched:
        service.cancel(w.req)
        w.done.wait(60)
    during = [b - a for w, k in zip(watched, before) for a, b in zip(w.times[k - 1:], w.times[k:]) if b <= end]
    calm = [b - a for w, k in zip(watched, before) for a, b in zip(w.times[:k], w.times[1:k]) if a >= all_in]
    return dict(worst_itl_ms=1e3 * max(during), p50_itl_ms_calm=1e3 * statistics.median(calm),
                joiner_ttft_ms=1e3 * (joiner.times[0] - arrival), window=(arrival, end))


def decode_only(service, spec: ModelSpec, riders: int, rider_prompt: int, tokens: int) -> float:
    """Aggregate decode tokens/s of `riders` once all have started and until the first ends (no prefill in it)."""
    watched = [Watched(service, Request(model=spec, prompt_ids=prompt(rider_prompt, 50 + i), max_new_tokens=tokens,
                                        params=GREEDY)) for i in range(riders)]
    for w in watched:
        w.done.wait(600)
    start = max(w.times[0] for w in watched)
    stop = min(w.times[-1] for w in watched)
    return sum(1 for w in watched for t in w.times if start < t <= stop) / (stop - start)


def busy_share(timeline, window) -> dict:
    start, end = window
    share = {}
    for worker in ("prefill", "decode"):
        busy = sum(max(0.0, min(e["end"], end) - max(e["start"], start)) for e in timeline if e["worker"] == worker)
        share[worker] = busy / (end - start)
    return share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--engines", default="batch:2,batch:1,disaggregated:2",
                    help="MODE:THREADS, comma-separated (THREADS in all: disaggregated gives each worker half)")
    ap.add_argument("--lengths", default="128,512,1024")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--riders", type=int, default=7)
    ap.add_argument("--rider-prompt", type=int, default=32)
    ap.add_argument("--long", type=int, default=1024)
    ap.add_argument("--decode-tokens", type=int, default=48)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    spec = ModelSpec(args.model, "cpu")
    out: dict = {}
    engines = [(mode, int(threads)) for mode, threads in (e.split(":") for e in args.engines.split(","))]
    for mode, threads in engines:
        name = f"{mode}, {threads} thread{'s' if threads > 1 else ''}" + (" (1 per worker)" if mode == "disaggregated" else "")
        print(f"[{name}] starting", file=sys.stderr, flush=True)
        service = service_for(mode, spec, threads, args.riders + 1, args.long)
        try:
            if mode == "disaggregated" and "carts" not in out:
                out["carts"] = carts(service, spec, [int(n) for n in args.lengths.split(",")], args.repeats)
            out[name] = mixed(service, spec, args.riders, args.rider_prompt, args.long, settle_tokens=6)
            if mode == "disaggregated":
                out[name]["busy"] = busy_share(list(service.scheduler.timeline), out[name]["window"])
            out[name]["decode_only_tok_s"] = decode_only(service, spec, args.riders + 1, args.rider_prompt,
                                                         args.decode_tokens)
        finally:
            service.close()
    if "carts" in out:
        print("| prompt tokens | KV handed over | write ms | read ms | crossing ms (prefill end to joined) | prefill ms |")
        print("|---|---|---|---|---|---|")
        for r in out["carts"]:
            print(f"| {r['tokens']} | {r['bytes'] / 2**20:.1f} MiB | {r['write_ms']:.1f} | {r['read_ms']:.1f} | "
                  f"{r['crossing_ms']:.1f} | {r['prefill_ms']:.0f} |")
    print()
    print(f"| engine | riders' p50 ITL, {args.riders} decoding | riders' worst ITL while a {args.long}-token prompt "
          f"joins | joiner's TTFT | decode-only tok/s ({args.riders + 1} riders) | busy share prefill / decode |")
    print("|---|---|---|---|---|---|")
    for name, m in out.items():
        if name == "carts":
            continue
        busy = f"{m['busy']['prefill']:.0%} / {m['busy']['decode']:.0%}" if "busy" in m else "one worker"
        print(f"| {name} | {m['p50_itl_ms_calm']:.0f} ms | {m['worst_itl_ms']:.0f} ms | {m['joiner_ttft_ms']:.0f} ms | "
              f"{m['decode_only_tok_s']:.1f} | {busy} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
