"""Is the first request after `engine serve` starts, or after it sat idle, slower than the ones after it?

Starts `python -m engine serve` (each start a fresh process). First three `/tokenize` calls for a chat message: the
HTTP stack and the chat template without the model, so the server's own first-call costs show above the noise of a
shared machine. Then streamed chat completions one at a time,
as guidellm does by default (sampled, `ignore_eos` for fixed lengths), from a light client (the standard library's
http.client, no torch in this process): a burst right after the server says it serves, a pause of --idle seconds,
another burst. Each burst's first request is set beside the median of the rest of the same burst, so the machine's
noise falls on both. `--beside import` starts, together with each burst's first request, a process that imports
torch and transformers, as a Python benchmark client does while its first requests go out; `--beside none` (the
default) keeps the cores to the server. `--baseline DIR`: another checkout (e.g. `git archive` of an older commit),
whose server takes turns with this one's, start by start.

    .venv/bin/python -m benchmarks.first_request [--starts 3] [--requests 6] [--idle 20] [--beside none|import]
                                                 [--baseline DIR]
Run it under `flock /tmp/tb/bench.lock` on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._servers import serve
from engine.serving.client.openai_client import Client

ROOT = Path(__file__).resolve().parent.parent
IMPORT_LIKE_A_CLIENT = "import torch, transformers"  # what a Python benchmark client loads as it starts
CHAT = "/v1/chat/completions"
WORDS = ("bend", "valley", "bridge", "token", "prefill", "decode", "cache", "road", "river", "lamp", "teacher", "class")


def start_server(port: int, args, checkout: Path):
    """`engine serve` from `checkout`, once it has said it serves (a `with`: stopped on leaving)."""
    return serve(["--port", str(port), "--mode", args.mode, "--threads", str(args.threads), *args.serve_args],
                 Path(f"/tmp/first_request_{port}.log"), cwd=checkout)


def tokenize_ms(client: Client, n: int = 3) -> list[float]:
    """Milliseconds of `n` /tokenize calls for a short chat, one after another."""
    out = []
    for i in range(n):
        start = time.perf_counter()
        client.json("POST", "/tokenize", {"messages": [{"role": "user", "content": f"Why is the sky blue ({i})?"}]})
        out.append((time.perf_counter() - start) * 1e3)
    return out


def burst(client: Client, args, rng: random.Random) -> list[tuple[float, float]]:
    """(TTFT, median ITL) of each request of one burst; the first one with a client-like start beside it if asked."""
    out, beside = [], None
    model = client.json("GET", "/v1/models")["data"][0]["id"]
    for i in range(args.requests):
        words = " ".join(rng.choice(WORDS) for _ in range(args.prompt_words))  # a fresh prompt: no cache can help
        body = {"model": model, "messages": [{"role": "user", "content": words}], "max_tokens": args.max_new_tokens,
                "ignore_eos": True, "stream": True}
        if i == 0 and args.beside == "import":
            beside = subprocess.Popen([sys.executable, "-c", IMPORT_LIKE_A_CLIENT], cwd="/")
        got = client.stream_completion(body, CHAT)
        out.append((got.ttft, statistics.median(got.itl) if got.itl else 0.0))
    if beside is not None:
        beside.wait()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--starts", type=int, default=3, help="fresh server processes, one after another")
    p.add_argument("--requests", type=int, default=6, help="requests per burst (the first is compared to the rest)")
    p.add_argument("--idle", type=float, default=20.0, help="seconds between the two bursts")
    p.add_argument("--prompt-words", type=int, default=100, help="words in each user message (~1.3 tokens each)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--mode", default="queue", choices=["queue", "batch"])
    p.add_argument("--threads", type=int, default=0, help="the server's torch threads (0: every core)")
    p.add_argument("--beside", default="none", choices=["none", "import"],
                   help="import: a process importing torch and transformers starts with each burst's first request")
    p.add_argument("--port", type=int, default=8761)
    p.add_argument("--baseline", type=Path, default=None, help="another checkout, its server taking turns with ours")
    p.add_argument("serve_args", nargs="*", help="more `engine serve` arguments (after --)")
    args = p.parse_args()
    rng = random.Random(0)
    checkouts = {"this checkout": ROOT, **({f"baseline {args.baseline}": args.baseline.resolve()} if args.baseline else {})}
    rows: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    tokenize: dict[str, list[list[float]]] = {name: [] for name in checkouts}
    load_before = os.getloadavg()[0]
    for s in range(args.starts):
        for k, (name, checkout) in enumerate(checkouts.items()):  # the checkouts take turns, start by start
            port = args.port + 2 * s + k
            with start_server(port, args, checkout):
                client = Client(f"http://127.0.0.1:{port}", timeout=120)
                tokenize[name].append(tokenize_ms(client))
                for burst_name in ("after start", "after idle"):
                    if burst_name == "after idle":
                        time.sleep(args.idle)
                    got = burst(client, args, rng)
                    rest = got[1:]
                    rows.setdefault((name, burst_name), []).append(
                        (got[0][0], statistics.median(t for t, _ in rest), got[0][1], statistics.median(g for _, g in rest)))
        print(f"start {s + 1}/{args.starts} done", file=sys.stderr, flush=True)
    print(f"\nchat prompts of {args.prompt_words} words, {args.max_new_tokens} new tokens, mode {args.mode}, "
          f"threads {args.threads or 'every core'}, beside: {args.beside}, {args.starts} starts x {args.requests} "
          f"requests, idle {args.idle:g} s; load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f}\n")
    print("| server | first /tokenize ms (each start) | later ones, median ms |")
    print("|---|---|---:|")
    for name, got in tokenize.items():
        print(f"| {name} | {', '.join(f'{t[0]:.1f}' for t in got)} | {statistics.median(x for t in got for x in t[1:]):.1f} |")
    print()
    print("| server | burst | first TTFT ms | rest's median TTFT ms | first / rest (median, min-max) | "
          "first's ITL ms | rest's ITL ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (name, burst_name), got in rows.items():
        ratios = [first / rest for first, rest, _, _ in got]
        print(f"| {name} | {burst_name} | {statistics.median(r[0] for r in got) * 1e3:.1f} | "
              f"{statistics.median(r[1] for r in got) * 1e3:.1f} | {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {statistics.median(r[2] for r in got) * 1e3:.1f} | "
              f"{statistics.median(r[3] for r in got) * 1e3:.1f} |")


if __name__ == "__main__":
    main()
