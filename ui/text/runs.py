"""The ledger's rows: every run of the session as a table, the last run's steps, and CSV for download.

Columns follow vLLM's metric names (TTFT, TPOT, ITL) so numbers compare with real servers.
Streamlit-free; built from engine Traces with engine.core.metrics.summarize.
"""
from __future__ import annotations

import pandas as pd

from engine.core.metrics import summarize

MS = 1000.0

DEFINITIONS = {
    "queue time": "waiting for the shared engine before the request started (vLLM: request queue time); not in TTFT",
    "TTFT": "time to first token: request start to the first generated token (prefill + first sampling)",
    "TPOT": "time per output token: (end-to-end − TTFT) / (output tokens − 1)",
    "ITL": "inter-token latency: the gap between two consecutive generated tokens (one decode step)",
    "prefill tokens/s": "prompt tokens / prefill time",
    "decode tokens/s": "batch size / TPOT",
    "CPU wait": "time the engine's threads were ready to run but every core was busy elsewhere (Linux schedstat); "
                "it is inside TTFT and TPOT",
}


def origin(trace) -> str:
    """Where a run's numbers come from: "local" (measured by this dashboard's engine in this session: the run panel
    gave it a model_spec), "server" (measured over HTTP) or "recording" (read from a file: another session's, maybe
    another machine's). Every page, table and report that says where a run comes from asks this."""
    if trace.source == "server":
        return "server"
    return "local" if trace.settings.get("model_spec") else "recording"


# Where a run's numbers come from, in the words the pages, the labs and the report all use (a chart's subtitle says
# it shorter: run_numbers.chart_note)
ORIGIN_WORDS = {"local": "measured on this machine in this session",
                "server": "measured over HTTP from a server in this session",
                "recording": "a recording, not measured in this session"}


def origin_words(trace) -> str:
    """ORIGIN_WORDS for this run."""
    return ORIGIN_WORDS[origin(trace)]


def runs_table(traces) -> pd.DataFrame:
    """One row per run, in order: what was asked and what each phase cost."""
    rows = []
    for i, trace in enumerate(traces, start=1):
        s = summarize(trace)
        rows.append({
            "run": i, "source": origin(trace), "model": trace.model, "device": trace.device, "dtype": trace.dtype,
            "prompt tokens": s.prompt_tokens, "output tokens": s.output_tokens,
            "queue (ms)": s.queue_s * MS, "TTFT (ms)": s.ttft_s * MS, "TPOT (ms)": s.tpot_s * MS,
            "CPU wait per token (ms)": _wait_ms(trace),
            "ITL p50 (ms)": s.itl_p50_s * MS, "ITL p99 (ms)": s.itl_p99_s * MS,
            "decode (ms)": s.decode_s * MS, "total (ms)": s.total_s * MS,
            "prefill share": s.prefill_share,
            "prefill tokens/s": s.prefill_tokens_per_s, "decode tokens/s": s.decode_tokens_per_s,
            "stop": trace.stop_reason, "temperature": trace.settings.get("temperature"),
            "chat": trace.settings.get("chat"),
        })
    return pd.DataFrame(rows)


def steps_table(trace) -> pd.DataFrame:
    """The last run token by token: row 0 is the first token (TTFT), then one row per decode step.

    A run measured on a server has no KV cache facts or riders (only what a client can see): those columns go."""
    rows = [{"token": 0, "phase": "prefill", "latency (ms)": trace.prefill_seconds * MS,
             "KV length": trace.n_prompt, "KV bytes": trace.n_prompt * trace.kv_bytes_per_token * trace.batch_size,
             "riders": 1, "stall (ms)": 0.0, "CPU wait (ms)": trace.prefill_cpu_wait_seconds * MS}]
    rows += [{"token": k, "phase": "decode", "latency (ms)": step.seconds * MS, "KV length": step.kv_length,
              "KV bytes": step.kv_bytes, "riders": step.riders, "stall (ms)": step.stall_seconds * MS,
              "CPU wait (ms)": step.cpu_wait_seconds * MS}
             for k, step in enumerate(trace.steps, start=1)]
    table = pd.DataFrame(rows)
    if trace.cpu_wait_seconds is None:  # not measured (an older file, disaggregated, no schedstat): no column of zeros
        table = table.drop(columns="CPU wait (ms)")
    if trace.threads_note:  # the decode loop changed its thread count: say which steps ran with how many
        table["threads"] = [None] + [step.threads or None for step in trace.steps]
    return table[["token", "phase", "latency (ms)"]] if trace.source == "server" else table


def _wait_ms(trace) -> float:
    """The run's CPU wait per decode step in ms; NaN when not measured or there was no decode step."""
    if trace.source == "server" or trace.cpu_wait_seconds is None or not trace.steps:
        return float("nan")
    return trace.decode_cpu_wait_seconds / len(trace.steps) * MS


def metrics_table(summary, server: bool = False) -> pd.DataFrame:
    """TTFT, TPOT, ITL percentiles and throughputs with units and their definitions.

    server=True: a run measured from outside, where any queueing is inside TTFT (the server's own /metrics
    split it out)."""
    rows = [
        ("queue time", summary.queue_s * MS, "ms", DEFINITIONS["queue time"]) if not server else
        ("queue time", float("nan"), "ms", "measured from outside: any queueing is part of TTFT"),
        ("TTFT", summary.ttft_s * MS, "ms", DEFINITIONS["TTFT"]),
        ("TPOT", summary.tpot_s * MS, "ms", DEFINITIONS["TPOT"]),
        ("ITL p50", summary.itl_p50_s * MS, "ms", DEFINITIONS["ITL"]),
        ("ITL p90", summary.itl_p90_s * MS, "ms", "90% of decode steps were at least this fast"),
        ("ITL p99", summary.itl_p99_s * MS, "ms", "99% of decode steps were at least this fast"),
        ("ITL max", summary.itl_max_s * MS, "ms", "the slowest decode step"),
        ("prefill tokens/s", summary.prefill_tokens_per_s, "tokens/s", DEFINITIONS["prefill tokens/s"]),
        ("decode tokens/s", summary.decode_tokens_per_s, "tokens/s", DEFINITIONS["decode tokens/s"]),
        ("end-to-end", summary.total_s * MS, "ms", "TTFT + all decode steps (warm-up and attention capture excluded)"),
    ]
    return pd.DataFrame(rows, columns=["metric", "value", "unit", "definition"])


SAME_REQUEST = ["source", "model", "device", "dtype", "prompt tokens", "output tokens"]  # one request, repeated


def spread_table(table: pd.DataFrame) -> pd.DataFrame:
    """Repeated runs of the same request (same model, device, dtype and lengths): how many, and the median and
    range of TTFT and TPOT across them. Only requests run at least twice; `table` is runs_table's."""
    columns = SAME_REQUEST + ["runs", "TTFT median (ms)", "TTFT min (ms)", "TTFT max (ms)",
                              "TPOT median (ms)", "TPOT min (ms)", "TPOT max (ms)"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    grouped = table.groupby(SAME_REQUEST, sort=False)
    out = grouped.agg(**{"runs": ("run", "count"),
                         "TTFT median (ms)": ("TTFT (ms)", "median"), "TTFT min (ms)": ("TTFT (ms)", "min"),
                         "TTFT max (ms)": ("TTFT (ms)", "max"), "TPOT median (ms)": ("TPOT (ms)", "median"),
                         "TPOT min (ms)": ("TPOT (ms)", "min"), "TPOT max (ms)": ("TPOT (ms)", "max")}).reset_index()
    return out[out["runs"] >= 2][columns].reset_index(drop=True)


def spread_note(spread: pd.DataFrame) -> str:
    """In words, from the measured spread: how much the same request moved between runs."""
    if spread.empty:
        return ("Run the same request again (press Run without changing anything) to see how much this machine's "
                "timings move from run to run: compare runs against that spread, not against one number.")
    lines = []
    for _, r in spread.iterrows():
        spread_ttft = r["TTFT max (ms)"] / r["TTFT min (ms)"] - 1 if r["TTFT min (ms)"] > 0 else float("nan")
        lines.append(f"The same {r['prompt tokens']} → {r['output tokens']} request, {r['runs']} runs: TTFT median "
                     f"{r['TTFT median (ms)']:,.1f} ms (range {r['TTFT min (ms)']:,.1f}–{r['TTFT max (ms)']:,.1f}, "
                     f"{spread_ttft:.0%} apart), TPOT median {r['TPOT median (ms)']:,.1f} ms (range "
                     f"{r['TPOT min (ms)']:,.1f}–{r['TPOT max (ms)']:,.1f}).")
    lines.append("A difference between two requests smaller than these ranges is run-to-run noise, not an effect.")
    return " ".join(lines)


def to_csv(table: pd.DataFrame) -> str:
    return table.to_csv(index=False, float_format="%.4f")
