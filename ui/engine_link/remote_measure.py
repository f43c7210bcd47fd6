"""The child process that measures one Run on the room's serving engine: `python -m ui.engine_link.remote_measure`.

The dashboard's RemoteEngine (ui/engine_link/remote_engine.py) starts it for each Run, so the page's drawing cannot
stretch its timestamps. It sends one streamed completion with the client of `python -m engine measure`
(engine/serving/client/), times it from outside, and prints the record `engine measure --json` prints as one JSON
line, plus the server's model, whether it is the local one, and the sampling asked for. Streamlit-free.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from engine.errors import EngineError
from engine.serving.client.openai_client import Client, scrape
from engine.serving.client.server_benchmark import REFUSALS, Plan, Prompts, discover, record, server_deltas
from engine.serving.scheduling.work import Request
from ui.engine_link import server_measurement
from ui.engine_link.model_names import same_model

ENV = "TWO_BENDS_ENGINE_URL"  # the room's serving engine, set by `two-bends dashboard --engine-url`
TIMEOUT_S = 120.0  # seconds without an answer from the server before the run fails


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


def command(url: str, work: Request) -> list[str]:
    """`python -m ui.engine_link.remote_measure ...` for this request (the prompt's ids travel as JSON)."""
    p = work.params
    ask = {"prompt_ids": list(work.prompt_ids), "prompt_text": work.prompt_text, "max_new_tokens": work.max_new_tokens,
           "sampling": {"temperature": p.temperature, "top_p": p.top_p, "top_k": p.top_k, "seed": p.seed},
           "local_model": work.model.name}
    return [sys.executable, "-m", "ui.engine_link.remote_measure", "--url", url, "--request", json.dumps(ask)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.engine_link.remote_measure",
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
