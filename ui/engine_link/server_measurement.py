"""The "Measure a server" page's helpers: the operator's allow-list, the measurement in its own process, the tables.

Streamlit-free. Two rules:
- A class dashboard must not become a tool that fetches any address for anyone in the room: the URL
  box is off unless the operator lists hosts in TWO_BENDS_MEASURE_HOSTS (scripts/dashboard.sh
  --measure-hosts host1,host2:port), and then only those hosts may be measured ("host" allows any
  port, "host:port" only that one). The client never follows redirects (engine/serving/client/openai_client.py).
- The instrument must not disturb the measurement: the client runs as `python -m engine measure --json`
  in a child process, so the page's drawing and other sessions cannot stretch its timestamps.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd

from engine.errors import EngineError
from engine.serving.client.benchmark_report import client_stats
from engine.serving.client.openai_client import parse_url
from engine.serving.client.server_benchmark import SERVER_NAMES

ENV = "TWO_BENDS_MEASURE_HOSTS"
ROOT = Path(__file__).resolve().parents[2]
RUN_LIMIT_S = 900.0  # the whole measurement, whatever the server does
MS = 1000.0


def allowed_hosts(environ=None) -> list[str]:
    """The operator's allow-list: lower-case "host" or "host:port" entries ([] = measuring is off)."""
    raw = (environ if environ is not None else os.environ).get(ENV, "")
    return [h.strip().lower() for h in raw.split(",") if h.strip()]


def check_url(url: str, allowed: list[str]) -> str:
    """The normalised base URL if its host (and port) is on the allow-list; EngineError otherwise."""
    if not allowed:
        raise EngineError(f"measuring other servers is off on this dashboard (the operator sets {ENV})")
    target = parse_url(url)
    host = f"[{target.host}]" if ":" in target.host else target.host
    if target.host not in allowed and f"{host}:{target.port}" not in allowed:
        raise EngineError(f"{host}:{target.port} is not on this dashboard's list of servers that may be measured "
                          f"({', '.join(allowed)})")
    return target.url


def command(url: str, model: str | None, prompt_tokens: int, max_new_tokens: int, requests: int, concurrency: int,
            shared_prefix: bool = False, warmup: int = 1) -> list[str]:
    cmd = [sys.executable, "-m", "engine", "measure", "--url", url, "--prompt-tokens", str(prompt_tokens),
           "--max-new-tokens", str(max_new_tokens), "--requests", str(requests), "--concurrency", str(concurrency),
           "--warmup", str(warmup), "--json"]
    return cmd + (["--model", model] if model else []) + (["--shared-prefix"] if shared_prefix else [])


def run_measurement(cmd: list[str], on_record=None, limit_s: float = RUN_LIMIT_S, on_start=None) -> list[dict]:
    """Run `python -m engine measure --json`, returning its records; `on_record(rec)` as each line arrives;
    `on_start(proc)` once the child runs (a caller that may cancel keeps it to kill it).

    Raises EngineError with the client's one-line error (or the time limit). Its stderr is read by a thread
    while stdout is read here: a pipe holds only 64 KB, and a child blocked writing to a full one never ends."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(limit_s, proc.kill)
    killer.start()
    if on_start is not None:
        on_start(proc)
    err_parts: list[str] = []
    err_reader = threading.Thread(target=lambda: err_parts.append(proc.stderr.read()), daemon=True)
    err_reader.start()
    records = []
    try:
        for line in proc.stdout:
            if line.startswith("{"):
                records.append(json.loads(line))
                if on_record is not None:
                    on_record(records[-1])
        proc.wait()
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err_reader.join(10)  # the child is gone, so its stderr is at its end (unless a grandchild holds it)
    err = "".join(err_parts).strip()
    if proc.returncode != 0:
        last = err.splitlines()[-1] if err else f"the measurement stopped (code {proc.returncode})"
        if proc.returncode < 0:
            last = f"the measurement took longer than {limit_s:.0f} s and was stopped"
        raise EngineError(last.removeprefix("error: "))
    return records


def server_means(records: list[dict]) -> dict[str, float]:
    """The server's own mean seconds per metric over these records (per-request scrapes summed, or the run's)."""
    totals: dict[str, list[float]] = {}
    scopes = [r["server_metrics"] for r in records if r.get("server_metrics")]
    if scopes and scopes[0]["scope"] == "run":
        scopes = scopes[:1]
    for m in scopes:
        for key in SERVER_NAMES:
            if key in m:
                t = totals.setdefault(key, [0.0, 0.0])
                t[0], t[1] = t[0] + m[key]["sum_seconds"], t[1] + m[key]["count"]
    return {k: s / n for k, (s, n) in totals.items() if n}


def comparison_table(records: list[dict]) -> pd.DataFrame:
    """Client-side next to server-side, in ms: what the network and HTTP layer add is the difference."""
    c, s = client_stats(records), server_means(records)
    rows = [("TTFT", c["ttft"], "ttft", "request sent → first token (server: arrival → first token)"),
            ("ITL", c["itl"], "itl", "gap between consecutive tokens"),
            ("TPOT", c["tpot"], None, "(end-to-end − TTFT) / (output tokens − 1)"),
            ("end-to-end", c["e2e"], "e2e", "request sent → last token"),
            ("queue", {}, "queue", "waiting inside the server before prefill"),
            ("prefill", {}, "prefill", "the server's prefill (TTFT without queue and HTTP)"),
            ("decode (whole request)", {}, "decode", "first token → last token inside the server")]
    out = []
    for name, stats, key, meaning in rows:
        out.append({"metric": name, "client mean (ms)": stats.get("mean", float("nan")) * MS,
                    "client p50 (ms)": stats.get("p50", float("nan")) * MS,
                    "client p90 (ms)": stats.get("p90", float("nan")) * MS,
                    "server mean (ms)": s.get(key, float("nan")) * MS if key else float("nan"), "meaning": meaning})
    return pd.DataFrame(out)


def outside_only(trace, what: str) -> str:
    """Why a page that needs the model's insides cannot draw a run measured on a server (Markdown)."""
    return (f"The last run was measured from outside, on a server ({trace.device}, model `{trace.model}`): a client "
            f"sees when each token arrives (TTFT {trace.prefill_seconds * MS:,.0f} ms, {trace.n_output} tokens), but not "
            f"{what}. Its timings are on the Home and Timing pages; press **Run** in the sidebar for a local run "
            "to see this page.")


def outside_caption(trace) -> str:
    """What a server-measured run's numbers include, for the Home and Timing pages."""
    settings = trace.settings
    return (f"Measured from outside on {settings.get('url', trace.device)} with `python -m engine measure` (request "
            f"{settings.get('request', '?')} of {settings.get('requests', '?')}, {settings.get('concurrency', 1)} at a "
            "time): TTFT runs from sending the request to the first token, so it includes any queueing, the network and "
            "the server's HTTP layer. The server's own split is on the Measure a server page.")


def no_replay(trace, what: str) -> str:
    """Why a run measured on the room's serving engine gets no view of the model's insides (Markdown)."""
    remote, local = trace.settings.get("remote_model"), trace.settings.get("local_model")
    if not remote:
        return outside_only(trace, what)
    return (outside_only(trace, what) + f" The room's server runs `{remote}` and this dashboard's engine `{local}`: "
            "replaying the prompt here would show another model's insides, so no attention or KV cache view is offered.")


def replay_offer(trace, what: str) -> str:
    """The offer to replay a server's run on the local engine, untimed, for its insides (Markdown)."""
    return (f"This run went to the room's serving engine ({trace.settings.get('url', trace.device)}): a client sees when "
            f"each token arrives, but not {what}. This dashboard's engine runs the same model "
            f"(`{trace.settings.get('local_model')}`) and can replay the same {trace.n_prompt} prompt tokens, untimed, "
            "to show them; every timing stays the server's.")


def replay_caption(replayed) -> str:
    """What a page drawn from a server's run plus its local replay shows, and where each part comes from."""
    facts = replayed.settings["replayed_locally"]
    return (f"Timings: measured on the room's server from outside. Attention and KV cache: replayed untimed on this "
            f"dashboard's engine ({facts['model']}, {facts['device']}, {facts['dtype']}); its first "
            f"{facts['tokens_agree']} of {replayed.n_output} output tokens are the server's.")


# --- replaying a Traffic-lab workload (pages/labs/lab_traffic.py) against the server ----------------------------
def traffic_offer(saved) -> str | None:
    """The checkbox label offering to replay the Traffic lab's latest workload, or None when there is none."""
    if not saved:
        return None
    workload, seed = saved
    from ui.text.traffic_text import describe_workload

    return f"Replay the Traffic lab's workload instead: {describe_workload(workload)}, seed {seed}"


def traffic_command(url: str, model: str | None, workload, seed: int, warmup: int = 1) -> list[str]:
    """`engine measure` in traffic mode with the flags that rebuild exactly this workload (same arrivals)."""
    cmd = [sys.executable, "-m", "engine", "measure", "--url", url, "--workload", workload.name,
           "--request-rate", str(workload.request_rate), "--burstiness", str(workload.burstiness),
           "--prompt-tokens", str(workload.prompt.mean), "--prompt-spread", str(workload.prompt.spread),
           "--max-new-tokens", str(workload.output.mean), "--output-spread", str(workload.output.spread),
           "--requests", str(workload.num_requests), "--seed", str(seed), "--warmup", str(warmup), "--json"]
    return cmd + (["--model", model] if model else [])


def traffic_table(records: list[dict], slo) -> pd.DataFrame:
    """One row: the replayed traffic's p50/p99 TTFT and ITL, throughput and goodput (as the Traffic lab's table)."""
    from engine.serving.client.traffic_benchmark import traffic_summary

    s = traffic_summary(records, slo)
    return pd.DataFrame([{"requests": s["requests"], "TTFT p50 (ms)": s["ttft_p50"] * MS, "TTFT p99 (ms)": s["ttft_p99"] * MS,
                          "ITL p50 (ms)": s["itl_p50"] * MS, "ITL p99 (ms)": s["itl_p99"] * MS,
                          "throughput (req/s)": s["throughput"], "goodput (req/s)": s["goodput"],
                          "met both SLOs": f"{s['good']}/{s['requests']}"}]).round(2)
