"""The phase summary of a measured server run: client-side timings next to the server's own /metrics.

Client-side numbers include the network and the server's HTTP layer; server-side ones are what
the server says about itself (vLLM's histograms: means only, since buckets are too coarse for
percentiles). When the two agree, the client measured the engine, not the road to it.
"""
from __future__ import annotations

import numpy as np

MS = 1000.0


def _stats(values) -> dict:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if not v.size:
        return {}
    return {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)), "p90": float(np.percentile(v, 90)),
            "p99": float(np.percentile(v, 99)), "max": float(v.max())}


def client_stats(records: list[dict]) -> dict:
    """TTFT, ITL, TPOT and E2E over all requests (seconds): mean and percentiles."""
    return {"ttft": _stats(r["prefill_seconds"] for r in records),
            "itl": _stats(s["seconds"] for r in records for s in r["steps"]),
            "tpot": _stats(r["tpot_seconds"] for r in records),
            "e2e": _stats(r["e2e_seconds"] for r in records)}


def server_means(facts: dict) -> dict:
    """The server's mean seconds per metric over the whole run (scraped before and after it)."""
    run = facts.get("server_metrics")
    if run:
        return {k: v["mean_seconds"] for k, v in run.items() if isinstance(v, dict)}
    return {}


def _ms(stats: dict, keys=("mean", "p50", "p90")) -> str:
    return " / ".join(f"{stats[k] * MS:,.1f}" for k in keys) + " ms" if stats else "n/a"


def format_report(records: list[dict], facts: dict) -> str:
    """A small plain-text table for the terminal."""
    c, s = client_stats(records), server_means(facts)
    first = records[0]
    tokens = "the server's /tokenize" if facts["tokenizer"] == "server" else "our SmolLM2 tokenizer (the server has no /tokenize)"
    out_tokens = sorted({r["output_tokens"] for r in records})
    head = [f"{facts['url']} · model {facts['model']} · {len(records)} request(s), concurrency {facts['concurrency']}"
            + (f" · {facts['warmup']} warm-up request(s) excluded" if facts["warmup"] else ""),
            f"prompt {first['prompt_tokens']} tokens (counted with {tokens}) -> output "
            f"{'/'.join(map(str, out_tokens))} tokens" + ("" if facts["ignore_eos"] else " (the server refused ignore_eos)")]

    def server(key: str) -> str:
        return f"{s[key] * MS:,.1f} ms" if key in s else "n/a"

    rows = [("", "client-side", "server-side (/metrics, mean)"),
            ("TTFT mean / p50 / p90", _ms(c["ttft"]), server("ttft")),
            ("ITL mean / p50 / p90 / p99", _ms(c["itl"], ("mean", "p50", "p90", "p99")), server("itl")),
            ("TPOT mean / p50 / p90", _ms(c["tpot"]), ""),
            ("end-to-end mean / p50 / p90", _ms(c["e2e"]), server("e2e")),
            ("queue (server)", "", server("queue")),
            ("prefill (server)", "", server("prefill")),
            ("decode per request (server)", "", server("decode"))]
    if not s:
        rows = [r[:2] + ("",) for r in rows]
        head.append("the server has no /metrics in Prometheus text with vLLM's names: client-side numbers only")
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(head + [""] + table)
