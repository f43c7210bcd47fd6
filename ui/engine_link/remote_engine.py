"""A room bigger than one machine: every Run goes to an existing OpenAI-compatible server, timed from outside.

`scripts/dashboard.sh --room --engine-url URL` sets TWO_BENDS_ENGINE_URL. The URL must be on the operator's
allow-list (TWO_BENDS_MEASURE_HOSTS, as for the Measure-a-server page): a class dashboard never sends prompts to
an address the operator did not list. Each Run is measured with the client of `python -m engine measure`
(engine/serving/client/) in a child process (`python -m ui.engine_link.remote_engine`), so the page's drawing
cannot stretch its timestamps: TTFT and ITL as the client sees them, queue time from the server's own /metrics
where it has vLLM's names. The result is a Trace with source "server", drawn by the Home and Timing pages.
The prompt goes as token ids when the server runs the same model as the local engine (same tokenizer), else as
text. Streamlit-free; the run panel (ui/controls/run_panel.py) follows the Request's events as for a local run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from dataclasses import replace

from engine.errors import EngineError
from engine.loading.model_store import ALIASES, HF_IDS
from engine.serving.client.openai_client import Client, scrape
from engine.serving.client.server_benchmark import REFUSALS, Plan, Prompts, discover, record, server_deltas, trace_from_record
from engine.serving.scheduling.work import Done, Failed, Progress, Request, Started
from ui.engine_link import server_measurement

ENV = "TWO_BENDS_ENGINE_URL"
TIMEOUT_S = 120.0  # seconds without an answer from the server before the run fails
RUN_LIMIT_S = 600.0  # the whole child process, whatever the server does


def engine_url(environ=None) -> str | None:
    """The room's serving engine (normalised), None when runs are local; EngineError when it is not allow-listed."""
    environ = os.environ if environ is None else environ
    url = environ.get(ENV, "").strip()
    if not url:
        return None
    try:
        return server_measurement.check_url(url, server_measurement.allowed_hosts(environ))
    except EngineError as exc:
        raise EngineError(f"the room's engine URL {url} is refused: {exc}. Add its host to "
                          f"--measure-hosts ({server_measurement.ENV}) or leave out --engine-url") from None


def canonical(name: str) -> str:
    """A model name as both sides may spell it: HuggingFaceTB/SmolLM2-135M-Instruct, smollm2-135m-instruct and our
    bundled model's short name are one model; openai-community/gpt2 is gpt2 (engine/loading/model_store.py's names)."""
    key = str(name).strip().lower().rstrip("/")
    by_id = {hf.lower(): short for short, hf in HF_IDS.items()}
    for candidate in (key, key.rsplit("/", 1)[-1]):
        if candidate in by_id:
            return by_id[candidate]
        if candidate in ALIASES or candidate in HF_IDS:
            return ALIASES.get(candidate, candidate)
    return key.rsplit("/", 1)[-1]


def same_model(remote: str, local: str) -> bool:
    return canonical(remote) == canonical(local)


# ----------------------------------------------------------------------------------------------
# The child process: one request, measured with engine measure's client, printed as one JSON record
# ----------------------------------------------------------------------------------------------
def measure_one(url: str, local_model: str, prompt_ids: list[int], prompt_text: str, max_new_tokens: int,
                sampling: dict, timeout: float = TIMEOUT_S) -> dict:
    """Send one completion to the server and time it from outside; the record `engine measure --json` prints,
    plus the server's model, whether it is the local one, and the sampling asked for."""
    client = Client(url, timeout)
    model = discover(client, None)
    same = same_model(model, local_model)
    prompt = list(prompt_ids) if same else prompt_text  # ids only mean the same text under the same tokenizer
    plan = Plan(client.target.url, prompt_tokens=max(1, len(prompt_ids)), max_new_tokens=max_new_tokens, model=model,
                warmup=0)
    prompts = Prompts([list(prompt_ids) if same else []], "ours" if same else "server", [prompt_text])
    body = {"model": model, "prompt": prompt, "max_tokens": max_new_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": float(sampling.get("temperature", 0.0)),
            "top_p": float(sampling.get("top_p", 1.0))}
    if sampling.get("seed") is not None:
        body["seed"] = int(sampling["seed"])
    extensions = {"return_token_ids": True, **({"top_k": int(sampling["top_k"])} if sampling.get("top_k") else {})}
    before = scrape(client, model)
    try:
        got = client.stream_completion(dict(body, **extensions))  # vLLM's extensions
    except EngineError as exc:  # a server that refuses them: ask again without
        if not any(w in str(exc) for w in (*REFUSALS, "top_k")):
            raise
        got = client.stream_completion(body)
    server = server_deltas(before, scrape(client, model), "request", 1)
    rec = record(plan, client, model, prompts, 0, got, server, ignore_eos=False)
    if not same:
        rec["prompt_ids"] = []  # the server's own tokens: not known here
    return dict(rec, local_model=local_model, same_model=same, sampling=sampling, prompt_text=prompt_text)


def command(url: str, work: Request, local_model: str) -> list[str]:
    """`python -m ui.engine_link.remote_engine ...` for this request (the prompt's ids travel as JSON)."""
    p = work.params
    ask = {"prompt_ids": list(work.prompt_ids), "prompt_text": work.prompt_text, "max_new_tokens": work.max_new_tokens,
           "sampling": {"temperature": p.temperature, "top_p": p.top_p, "top_k": p.top_k, "seed": p.seed},
           "local_model": local_model}
    return [sys.executable, "-m", "ui.engine_link.remote_engine", "--url", url, "--request", json.dumps(ask)]


def queue_seconds(rec: dict) -> float:
    """The server's own queue time for this request (vLLM's request_queue_time), 0 when it does not say. The scrapes
    bracket this request, so with other students' requests ending inside that window it is their mean."""
    queue = (rec.get("server_metrics") or {}).get("queue")
    return float(queue["mean_seconds"]) if queue else 0.0


def to_trace(rec: dict, local_spec: list | None = None):
    """The measured request as a Trace (source "server"), with what a local replay needs in its settings."""
    trace = trace_from_record(rec)
    trace.queue_seconds = queue_seconds(rec)
    trace.settings.update(remote_model=rec["model"], local_model=rec.get("local_model"),
                          same_model=bool(rec.get("same_model")), sampling=rec.get("sampling"),
                          replay_spec=list(local_spec) if local_spec and rec.get("same_model") else None)
    if rec.get("sampling"):
        trace.settings["temperature"] = rec["sampling"].get("temperature", 0.0)
    return trace


def with_local_insides(server, local):
    """The server's run with the insides of the local engine's untimed replay of the same prompt: attention, KV
    cache, config and tokens from `local`; every timing (TTFT, each gap, queue) from `server`."""
    n = min(len(server.steps), len(local.steps))
    steps = [replace(local.steps[k], seconds=server.steps[k].seconds) for k in range(n)]
    n_out = n + 1
    agree = next((k for k, (a, b) in enumerate(zip(server.output_ids, local.output_ids)) if a != b),
                 min(len(server.output_ids), len(local.output_ids)))
    replayed = {"model": local.model, "device": local.device, "dtype": local.dtype, "tokens_agree": agree}
    return replace(local, output_ids=local.output_ids[:n_out], output_tokens=local.output_tokens[:n_out],
                   prefill_seconds=server.prefill_seconds, steps=steps, queue_seconds=server.queue_seconds,
                   warmup_seconds=0.0, capture_seconds=0.0, device=server.device, env=dict(server.env),
                   settings=dict(server.settings, replayed_locally=replayed), source="server")


# ----------------------------------------------------------------------------------------------
# The dashboard's side: a Request's events, as the local engine worker would send them
# ----------------------------------------------------------------------------------------------
def route(work: Request, local_submit) -> str | None:
    """Send a Run to the room's serving engine when the operator gave one, else to the engine worker; both through
    `local_submit(work, send=...)` (worker_link.submit), so a room's one-run-each rule holds for either. None when
    accepted, else the refusal in words (an engine URL off the allow-list refuses every Run)."""
    try:
        url = engine_url()
    except EngineError as exc:
        return str(exc)
    if url is None:
        return local_submit(work)
    return local_submit(work, send=lambda w: submit(w, url, w.model))  # the room's rules, then the server


def submit(work: Request, url: str, local_spec) -> None:
    """Measure `work` on the server in a child process; its events (Progress, Started, Done or Failed) arrive on
    `work.events` like a local run's. `work.cancel()` stops the child."""
    cmd = command(url, work, local_spec.name)
    threading.Thread(target=_run, args=(work, cmd, url, local_spec), name="two-bends-remote-run", daemon=True).start()


def _run(work: Request, cmd: list[str], url: str, local_spec) -> None:
    work.emit(Progress(f"Sent to the room's serving engine at {url}: timed from outside, tokens arrive at the end", -1))
    procs, finished = [], threading.Event()

    def started(proc) -> None:
        procs.append(proc)
        if work.cancelled.is_set():  # cancelled before the child even started
            proc.kill()

    def watch() -> None:
        while not finished.is_set():
            if work.cancelled.wait(0.2):
                for proc in procs:
                    proc.kill()
                return

    threading.Thread(target=watch, daemon=True).start()
    try:
        records = server_measurement.run_measurement(cmd, limit_s=RUN_LIMIT_S, on_start=started)
    except EngineError as exc:
        work.emit(Failed("cancelled", cancelled=True) if work.cancelled.is_set() else Failed(str(exc)))
        return
    finally:
        finished.set()  # ends the watcher (the child is gone either way)
    if work.cancelled.is_set():
        work.emit(Failed("cancelled", cancelled=True))
        return
    if not records:
        work.emit(Failed(f"{url} sent no measured request back"))
        return
    rec = records[-1]
    work.emit(Started(queue_seconds(rec)))
    spec = [local_spec.name, local_spec.device, local_spec.dtype, local_spec.kernels]
    work.emit(Done(to_trace(rec, spec)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.engine_link.remote_engine",
                                     description="Measure one request on the room's serving engine (one JSON line).")
    parser.add_argument("--url", required=True)
    parser.add_argument("--request", help="JSON: prompt_ids, prompt_text, max_new_tokens, sampling, local_model")
    parser.add_argument("--check", action="store_true", help="only check the URL against the allow-list")
    args = parser.parse_args(argv)
    try:
        url = engine_url({**os.environ, ENV: args.url})
        if args.check:
            print(url)
            return 0
        ask = json.loads(args.request or "{}")
        rec = measure_one(url, ask.get("local_model", ""), ask.get("prompt_ids", []), ask.get("prompt_text", ""),
                          int(ask.get("max_new_tokens", 16)), ask.get("sampling", {}))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
