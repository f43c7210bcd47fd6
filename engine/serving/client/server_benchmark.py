"""`python -m engine measure`: the same two bends, timed on any OpenAI-compatible server from the outside.

K requests, C at a time, each with exactly N prompt tokens (counted by the server's own tokenizer
through its /tokenize when it offers one, else by ours, and the report says which) and M output
tokens (`ignore_eos`, so M really come; a server that refuses it is asked without, and each record
says which). Each prompt starts with its own random tag, so no prefix cache can help, unless
`shared_prefix` moves the tag to the end. The server's /metrics (vLLM's
names) is read before and after: with C = 1 around every request, else around the whole run.
Each request becomes a record (one JSON line) and an engine Trace (source "server"), so the
dashboard draws it with the same panels as a local run.
"""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from engine.core.trace import DecodeStep, Trace
from engine.errors import EngineError
from engine.serving.client.openai_client import Client, Streamed, scrape

SERVER_NAMES = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
                "prefill": "vllm:request_prefill_time_seconds", "decode": "vllm:request_decode_time_seconds",
                "queue": "vllm:request_queue_time_seconds", "e2e": "vllm:e2e_request_latency_seconds"}
SERVER_COUNTERS = {"prompt_tokens": "vllm:prompt_tokens_total", "generation_tokens": "vllm:generation_tokens_total"}
MAX_REQUESTS, MAX_CONCURRENCY = 1000, 64
REFUSALS = ("ignore_eos", "return_token_ids", "nrecognized")  # words of a server's error that refuses vLLM's extensions


@dataclass
class Plan:
    url: str
    prompt_tokens: int
    max_new_tokens: int
    model: str | None = None  # None: the first model the server lists
    requests: int = 1
    concurrency: int = 1
    shared_prefix: bool = False
    warmup: int = 1  # requests sent first and left out of every number
    timeout: float = 120.0  # seconds without an answer before giving up
    api_key: str = ""  # sent as a Bearer token (a server started with --api-key); "" sends none

    def check(self) -> Plan:
        for name, value, low, high in (("--prompt-tokens", self.prompt_tokens, 1, 1_000_000),
                                       ("--max-new-tokens", self.max_new_tokens, 1, 1_000_000),
                                       ("--requests", self.requests, 1, MAX_REQUESTS),
                                       ("--concurrency", self.concurrency, 1, MAX_CONCURRENCY), ("--warmup", self.warmup, 0, 100)):
            if not low <= value <= high:
                raise EngineError(f"{name} must be from {low} to {high:,} (got {value})")
        if not self.timeout > 0:
            raise EngineError(f"--timeout must be positive (got {self.timeout})")
        return self


@dataclass
class Prompts:
    ids: list[list[int]]  # one per request (the warm-up ones first)
    tokenizer: str  # "server" (its /tokenize) or "ours" (the bundled SmolLM2 tokenizer)
    texts: list[str] = field(default_factory=list)  # sent instead of ids when the tokenizer is ours

    def body(self, i: int):
        return self.texts[i] if self.texts else self.ids[i]


class Sender:
    """Streams request i with vLLM's extensions (ignore_eos, return_token_ids) until the server refuses them: the first
    refusal (a warm-up's, or a measured request's when there is none) turns them off for the rest of the run."""

    def __init__(self, client: Client, model: str, prompts: Prompts):
        self.client, self.model, self.prompts = client, model, prompts
        self.extensions = True

    def body(self, i: int, max_tokens: int, extensions: bool) -> dict:
        b = {"model": self.model, "prompt": self.prompts.body(i), "max_tokens": max_tokens, "temperature": 0.0,
             "stream": True, "stream_options": {"include_usage": True}}
        return dict(b, ignore_eos=True, return_token_ids=True) if extensions else b

    def send(self, i: int, max_tokens: int) -> tuple[Streamed, bool]:
        """Request i, and whether it asked for ignore_eos."""
        asked = self.extensions
        try:
            return self.client.stream_completion(self.body(i, max_tokens, asked)), asked
        except EngineError as exc:  # a server that refuses vLLM's extensions: go on without them
            if not asked or not any(w in str(exc) for w in REFUSALS):
                raise
            self.extensions = False
            return self.client.stream_completion(self.body(i, max_tokens, False)), False


def discover(client: Client, model: str | None) -> str:
    """The model to ask for: `model` if the server lists it, else the server's first one."""
    try:
        listed = client.json("GET", "/v1/models")
        names = [m["id"] for m in listed["data"]]
    except EngineError as exc:
        if "answered HTTP" in str(exc) or "JSON" in str(exc):
            raise EngineError(f"{client.target.url} does not look like an OpenAI-compatible server: {exc}") from None
        raise
    except (TypeError, KeyError):
        raise EngineError(f"{client.target.url} does not look like an OpenAI-compatible server: GET /v1/models "
                          "did not list models as {\"data\": [{\"id\": ...}]}") from None
    if model is None:
        if not names:
            raise EngineError(f"{client.target.url} lists no models")
        return names[0]
    if names and model not in names:
        raise EngineError(f"{client.target.url} does not serve '{model}'; it lists: {', '.join(names)}")
    return model


def _our_tokenizer():
    from engine.loading.loader import load_model
    from engine.loading.model_store import DEFAULT_MODEL, bundled_converted, bundled_folder

    if bundled_converted():
        from engine.loading.tokenizer_file import PlainTokenizer

        return PlainTokenizer.from_folder(bundled_folder())
    return load_model(DEFAULT_MODEL, "cpu").tokenizer


def build_prompts(client: Client, model: str, n_tokens: int, count: int, shared_prefix: bool) -> Prompts:
    """`count` prompts of exactly n_tokens tokens, distinct from their first token (or only at the end if shared)."""
    from engine.core.prompting import SWEEP_TEXT

    status, raw = client.call("POST", "/tokenize", {"model": model, "prompt": "Two bends"})
    if status == 200 and b'"tokens"' in raw:
        def encode(text: str) -> list[int]:
            return list(client.json("POST", "/tokenize", {"model": model, "prompt": text})["tokens"])
        source, tok = "server", None
    else:
        tok = _our_tokenizer()

        def encode(text: str) -> list[int]:
            return tok.encode(text, add_special_tokens=False)
        source = "ours"
    filler = encode(SWEEP_TEXT)
    filler = filler * (n_tokens // max(1, len(filler)) + 1)
    prompts = []
    for _ in range(count):
        tag = encode(f"[{uuid.uuid4().hex[:8]}] ")  # a random tag: no two prompts share a prefix
        prompts.append((filler[:max(0, n_tokens - len(tag))] + tag)[-n_tokens:] if shared_prefix else (tag + filler)[:n_tokens])
    texts = [tok.decode(p) for p in prompts] if tok is not None else []
    return Prompts(prompts, source, texts)


def server_deltas(before: dict | None, after: dict | None, scope: str, requests: int) -> dict | None:
    """What the server's own metrics say happened between two scrapes: mean seconds per observation."""
    if before is None or after is None:
        return None
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    out: dict = {"scope": scope, "requests": requests}
    for short, name in SERVER_NAMES.items():
        count, total = delta.get(name + "_count", 0.0), delta.get(name + "_sum", 0.0)
        if count > 0:
            out[short] = {"mean_seconds": total / count, "count": int(round(count)), "sum_seconds": total}
    for short, name in SERVER_COUNTERS.items():
        if name in delta:
            out[short] = int(round(delta[name]))
    return out


def record(plan: Plan, client: Client, model: str, prompts: Prompts, i: int, got: Streamed, server: dict | None,
           ignore_eos: bool = True) -> dict:
    """One measured request as a Trace-shaped JSON object (the --json line); `ignore_eos`: whether it was asked for."""
    n_prompt = (got.usage or {}).get("prompt_tokens") or len(prompts.ids[i])
    return {"source": "server", "url": client.target.url, "model": model, "request": i - plan.warmup + 1,
            "prompt_tokens": n_prompt, "output_tokens": got.output_tokens, "prefill_seconds": got.ttft,
            "steps": [{"seconds": s} for s in got.itl], "e2e_seconds": got.e2e,
            "tpot_seconds": (got.e2e - got.ttft) / (got.output_tokens - 1) if got.output_tokens > 1 else None,
            "text": "".join(got.pieces), "prompt_text": prompts.texts[i] if prompts.texts else "",
            "finish_reason": got.finish_reason, "tokenizer": prompts.tokenizer,
            "prompt_ids": prompts.ids[i], "output_ids": got.token_ids, "concurrency": plan.concurrency,
            "requests": plan.requests, "max_new_tokens": plan.max_new_tokens, "shared_prefix": plan.shared_prefix,
            "ignore_eos": ignore_eos, "server_metrics": server}


def trace_from_record(rec: dict) -> Trace:
    """An engine Trace from a measured request, so the dashboard's panels draw it (no config, no attention)."""
    n_prompt, n_out = int(rec["prompt_tokens"]), int(rec["output_tokens"])
    prompt_ids = rec.get("prompt_ids") or []
    output_ids = rec.get("output_ids") or []
    steps = [DecodeStep(float(s["seconds"]), n_prompt + k, 0) for k, s in enumerate(rec["steps"], start=1)]
    where = rec["url"].split("://", 1)[-1]
    settings = {k: rec.get(k) for k in ("url", "tokenizer", "concurrency", "requests", "max_new_tokens", "shared_prefix",
                                        "e2e_seconds", "server_metrics", "request")}
    return Trace(model=rec["model"], device=f"server {where}", dtype="as served", text=rec.get("text", ""),
                 prompt_text=rec.get("prompt_text", ""),
                 prompt_ids=prompt_ids if len(prompt_ids) == n_prompt else [-1] * n_prompt,  # -1: id not known
                 output_ids=output_ids if len(output_ids) == n_out else [-1] * n_out,
                 prefill_seconds=float(rec["prefill_seconds"]), steps=steps,
                 env={"device_name": f"a server at {rec['url']}", "threads": "?", "torch": "?"},
                 stop_reason="eos" if rec.get("finish_reason") == "stop" else "length",
                 settings=dict(settings, temperature=0.0, ignore_eos=rec.get("ignore_eos", True)),  # older records: asked
                 source="server")


def run(plan: Plan, on_record=None) -> tuple[list[dict], dict]:
    """Measure; returns (records in request order, facts about the run). `on_record(rec)` as each one is ready."""
    plan.check()
    client = Client(plan.url, plan.timeout, plan.api_key)
    model = discover(client, plan.model)
    prompts = build_prompts(client, model, plan.prompt_tokens, plan.warmup + plan.requests, plan.shared_prefix)
    sender = Sender(client, model, prompts)
    for i in range(plan.warmup):
        sender.send(i, plan.max_new_tokens)
    first = plan.warmup
    per_request = plan.concurrency == 1
    records: list[dict | None] = [None] * plan.requests
    start = scrape(client, model)

    def one(i: int) -> dict:
        before = scrape(client, model) if per_request else None
        got, asked = sender.send(i, plan.max_new_tokens)
        server = server_deltas(before, scrape(client, model), "request", 1) if per_request else None
        rec = record(plan, client, model, prompts, i, got, server, asked)
        records[i - first] = rec
        if on_record is not None and per_request:
            on_record(rec)
        return rec

    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        for future in [pool.submit(one, i) for i in range(first, first + plan.requests)]:
            future.result()
    run_metrics = server_deltas(start, scrape(client, model), "run", plan.requests)
    if not per_request:
        for rec in records:
            rec["server_metrics"] = run_metrics
            if on_record is not None:
                on_record(rec)
    facts = {"url": client.target.url, "model": model, "tokenizer": prompts.tokenizer, "ignore_eos": sender.extensions,
             "server_metrics": run_metrics, "warmup": plan.warmup, "concurrency": plan.concurrency}
    return records, facts
