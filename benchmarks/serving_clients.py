"""guidellm and aiperf, run as their users type them, against `engine serve`: every request answered, and the
clients' means beside the server's own /metrics over the same requests.

Each client lives in a venv of its own outside the clone (they pin other versions of torch and transformers than
ours): `python3.11 -m venv ~/.cache/two-bends/guidellm-venv && ~/.cache/two-bends/guidellm-venv/bin/pip install
guidellm==0.8.1`, the same for aiperf==0.13.0 (TWO_BENDS_GUIDELLM_VENV / TWO_BENDS_AIPERF_VENV point elsewhere).
Offline, both load the tokenizer from the converted model's folder (`model_store.bundled_folder()`); online, the
served name (the model's Hugging Face id) is enough. Each run starts a fresh server, sends streamed chat requests
of fixed lengths (`ignore_eos`), reads /metrics before and after, and compares means: TTFT; the per-request
inter-token latency both clients report ((last token - first token) / (tokens - 1), averaged over requests) with
vLLM's `vllm:request_time_per_output_token_seconds`; end-to-end latency.

    .venv/bin/python -m benchmarks.serving_clients [--clients guidellm aiperf] [--modes queue batch]
                                                   [--requests 24] [--concurrency 1 4]
Run it under `flock /tmp/tb/bench.lock` on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks._servers import serve
from engine.loading.cache_folder import cache_root
from engine.loading.model_store import bundled_folder
from engine.serving.client.openai_client import Client, parse_metrics

CLIENTS = ("guidellm", "aiperf")
VERSIONS = {"guidellm": "0.8.1", "aiperf": "0.13.0"}
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 32
SERVER_MEANS = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:request_time_per_output_token_seconds",
                "e2e": "vllm:e2e_request_latency_seconds"}


def venv(client: str) -> Path:
    return Path(os.environ.get(f"TWO_BENDS_{client.upper()}_VENV") or cache_root() / f"{client}-venv")


def installed(client: str) -> bool:
    return (venv(client) / "bin" / client).is_file()


@dataclass
class Load:
    requests: int = 24
    concurrency: int = 1
    prompt_tokens: int = PROMPT_TOKENS
    output_tokens: int = OUTPUT_TOKENS


def command(client: str, url: str, model: str, load: Load, out: Path) -> tuple[list[str], dict]:
    """(argv, environment) of one client run writing its results under `out`."""
    exe, tokenizer = str(venv(client) / "bin" / client), str(bundled_folder())
    env = dict(os.environ, DO_NOT_TRACK="1")
    if client == "guidellm":
        env["HF_HUB_OFFLINE"] = "1"  # the tokenizer is a local folder: nothing to fetch
        profile = "kind=synchronous" if load.concurrency == 1 else f"kind=concurrent,streams={load.concurrency}"
        return [exe, "run", "--backend", f"kind=openai_http,target={url},model={model}",
                "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
                "--data", f"kind=synthetic_text,prompt_tokens={load.prompt_tokens},output_tokens={load.output_tokens}",
                "--profile", profile, "--constraint", f"kind=max_requests,count={load.requests}",
                "--output", f"kind=json,path={out / 'guidellm.json'}", "--disable-console-interactive"], env
    # aiperf: no HF_HUB_OFFLINE, which makes aiperf 0.13.0 look a local folder up as a Hub id in its cache and fail
    env.pop("HF_HUB_OFFLINE", None)
    return [exe, "profile", "--model", model, "--url", url, "--endpoint-type", "chat", "--streaming",
            "--tokenizer", tokenizer, "--apply-chat-template",
            "--synthetic-input-tokens-mean", str(load.prompt_tokens), "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(load.output_tokens), "--output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--request-count", str(load.requests),
            "--concurrency", str(load.concurrency), "--random-seed", "0", "--ui", "none",
            "--artifact-dir", str(out / "aiperf")], env


def client_means(client: str, out: Path) -> dict:
    """{"completed", "failed", "ttft", "itl", "e2e"} (seconds) from the client's own result file."""
    if client == "guidellm":
        metrics = json.loads((out / "guidellm.json").read_text())["benchmarks"][0]["metrics"]
        totals = metrics["request_totals"]

        def mean(name: str, scale: float) -> float:
            return metrics[name]["successful"]["mean"] * scale

        return {"completed": totals["successful"], "failed": totals["errored"] + totals["incomplete"],
                "ttft": mean("time_to_first_token_ms", 1e-3), "itl": mean("inter_token_latency_ms", 1e-3),
                "e2e": mean("request_latency", 1.0)}
    found = json.loads((out / "aiperf" / "profile_export_aiperf.json").read_text())
    errors = found.get("error_request_count") or {}
    scraped = json.loads((out / "aiperf" / "server_metrics_export.json").read_text())["metrics"]  # our /metrics, as read
    tpot = scraped.get(SERVER_MEANS["itl"], {"series": [{"stats": {}}]})["series"][0]["stats"]
    return {"completed": int(found["request_count"]["avg"]), "failed": int(errors.get("avg", 0)),
            "ttft": found["time_to_first_token"]["avg"] * 1e-3, "itl": found["inter_token_latency"]["avg"] * 1e-3,
            "e2e": found["request_latency"]["avg"] * 1e-3,
            "scraped_itl": (tpot.get("count", 0), tpot.get("avg", float("nan")))}


def server_means(before: dict, after: dict) -> dict:
    """The server's own means over what happened between two scrapes of /metrics, and its finished requests."""
    grew = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    out = {"completed": int(round(grew.get("vllm:request_success_total", 0.0)))}
    for short, name in SERVER_MEANS.items():
        count = grew.get(name + "_count", 0.0)
        out[short] = grew.get(name + "_sum", 0.0) / count if count else float("nan")
    return out


def metrics(url: str) -> dict:
    return parse_metrics(Client(url).call("GET", "/metrics")[1].decode())


def run(client: str, mode: str, load: Load, port: int, timeout: float = 900.0) -> dict:
    """One client against a fresh server (`python -m engine serve` in its own session, once it says it serves; always
    stopped): {"client": its means, "server": the server's, "seconds": wall time}."""
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix=f"serving-clients-{mode}-", suffix=".log")[1])
    with serve(["--port", str(port), "--mode", mode], log), tempfile.TemporaryDirectory(prefix=f"{client}-") as folder:
        out = Path(folder)
        argv, env = command(client, url, Client(url).json("GET", "/v1/models")["data"][0]["id"], load, out)
        before, start = metrics(url), time.monotonic()
        done = subprocess.run(argv, env=env, cwd=folder, capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            raise RuntimeError(f"{client} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
        return {"client": client_means(client, out), "server": server_means(before, metrics(url)), "seconds": seconds}


def pair(client: dict, server: dict, key: str, scale: float, digits: int) -> str:
    """'client / server (difference)' for one mean."""
    c, s = client[key] * scale, server[key] * scale
    return f"{c:.{digits}f} / {s:.{digits}f} ({c / s - 1:+.1%})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=CLIENTS)
    p.add_argument("--modes", nargs="+", default=["queue", "batch"], choices=["queue", "batch"])
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                   help="requests in flight, one value per mode (queue mode serves one at a time anyway)")
    p.add_argument("--port", type=int, default=8771)
    args = p.parse_args()
    missing = [c for c in args.clients if not installed(c)]
    if missing:
        sys.exit(f"not installed: {', '.join(f'{c}=={VERSIONS[c]} in {venv(c)}' for c in missing)} (see --help)")
    rows, load_before = [], os.getloadavg()[0]
    for i, mode in enumerate(args.modes):
        load = Load(args.requests, args.concurrency[min(i, len(args.concurrency) - 1)])
        for k, client in enumerate(args.clients):
            got = run(client, mode, load, args.port + 2 * i + k)
            rows.append((client, mode, load, got))
            print(f"{client} against {mode} mode done in {got['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(f"\nchat, {PROMPT_TOKENS} prompt tokens (the clients' count) and {OUTPUT_TOKENS} output tokens; load average "
          f"before {load_before:.2f}, after {os.getloadavg()[0]:.2f}\n")
    print("| client | mode, concurrency | completed / failed (server's count) | TTFT ms client / server | "
          "ITL per request ms client / server | E2E s client / server |")
    print("|---|---|---|---|---|---|")
    for client, mode, load, got in rows:
        c, s = got["client"], got["server"]
        print(f"| {client} {VERSIONS[client]} | {mode}, {load.concurrency} | {c['completed']} / {c['failed']} "
              f"({s['completed']}) | {pair(c, s, 'ttft', 1e3, 1)} | {pair(c, s, 'itl', 1e3, 2)} | "
              f"{pair(c, s, 'e2e', 1, 3)} |")


if __name__ == "__main__":
    main()
