"""A one-page HTML report for students to keep: one run (key figures, phase split, ITL chart, diagnosis) or several
runs side by side (the handout: one column per run, the phases compared, each run's ITL chart and verdict).

Self-contained: Plotly's JavaScript is inlined once, so the file opens offline, on any machine, forever.
Every piece of text from the trace (prompt, output, model name) is HTML-escaped: shown as text, never as
markup. Streamlit-free; the Timing page offers it as a download.
"""
from __future__ import annotations

import html
import math
import re

import plotly.io as pio
from plotly.offline import get_plotlyjs

from engine.core.metrics import bridge_sharing, summarize
from engine.core.trace_file import describe
from ui.figures import fig_timing
from ui.figures.theme import DECODE_COLOR, PREFILL_COLOR
from ui.text import diagnosis, runs

MAX_TEXT_CHARS = 20_000  # prompt and output shown in the report (a 50 MB file could hold far more)

STYLE = f"""
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1rem; }}
h1 {{ margin-bottom: 0.2rem; }} .sub {{ color: #666; margin-top: 0; }}
.cards {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 0.8rem; margin: 1.2rem 0; }}
.card {{ border: 1px solid #ddd; border-radius: 8px; padding: 0.6rem 0.8rem; }}
table.side {{ border-collapse: collapse; margin: 1rem 0; font-size: 0.92rem; }}
table.side th, table.side td {{ border: 1px solid #ddd; padding: 0.3rem 0.55rem; text-align: right; vertical-align: top; }}
table.side th:first-child, table.side td:first-child {{ text-align: left; color: #555; white-space: nowrap; }}
table.side td.verdict {{ text-align: left; min-width: 11rem; }} .wide {{ overflow-x: auto; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 0.8rem; }}
.grid > div {{ min-width: 0; }}
.card .v {{ font-size: 1.5rem; font-weight: 600; }} .card .k {{ color: #555; font-size: 0.9rem; }}
.prefill {{ border-top: 5px solid {PREFILL_COLOR}; }} .decode {{ border-top: 5px solid {DECODE_COLOR}; }}
pre {{ white-space: pre-wrap; background: #f6f6f6; padding: 0.8rem; border-radius: 6px; max-height: 24rem;
      overflow: auto; }}
del {{ color: #777; }} footer {{ color: #777; font-size: 0.85rem; margin-top: 2rem; }}
"""


def _ms(seconds: float) -> str:
    return "n/a" if not math.isfinite(seconds) else f"{seconds * 1000:,.1f} ms"


def _rate(value: float, unit: str) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:,.1f} {unit}"


def _inline(markdown: str) -> str:
    """Our own diagnosis text (no user text inside) from light Markdown to HTML: **bold**, escaped first."""
    text = html.escape(markdown.replace("\n", " "))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def _card(key: str, value: str, css: str = "") -> str:
    return f'<div class="card {css}"><div class="k">{html.escape(key)}</div><div class="v">{html.escape(value)}</div></div>'


def _diagnosis_html(summary) -> str:
    d = diagnosis.diagnose(summary)
    helps = "".join(f"<li><b>{html.escape(n)}</b> — {html.escape(w)}</li>" for n, w in d.helps)
    wasted = "".join(f"<li><del>{html.escape(n)}</del> — {html.escape(w)}</li>" for n, w in d.wasted)
    server = "".join(f"<li><i>{html.escape(n)}</i> — {html.escape(w)}</li>" for n, w in d.server)
    return (f"<h2>Diagnosis</h2><h3>{html.escape(d.headline)}</h3><p>{html.escape(d.details)}</p>"
            f"<p><b>Remedies that help this request:</b></p><ul>{helps}</ul>"
            f"<p><b>Remedies that would be wasted here:</b></p><ul>{wasted}</ul>"
            f"<p><b>Remedies for a shared server</b> (they help the room, not this request):</p><ul>{server}</ul>")


def _text_block(title: str, text: str) -> str:
    shown = text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + " […]"
    return f"<h3>{html.escape(title)}</h3><pre>{html.escape(shown) or '(empty)'}</pre>"


def run_report(trace, title: str = "") -> str:
    """The whole report as one HTML document (about 4.6 MB, most of it Plotly's JavaScript)."""
    summary = summarize(trace)
    figures = [
        fig_timing.phase_split_figure(summary),
        fig_timing.itl_figure(trace.prefill_seconds, [s.seconds for s in trace.steps],
                              stall_s=[s.stall_seconds for s in trace.steps], riders=[s.riders for s in trace.steps]),
    ]
    charts = "".join(_chart(f) for f in figures)
    recording = trace.settings.get("recording") or {}
    heading = title or recording.get("title") or f"{trace.n_prompt} prompt tokens → {trace.n_output} output tokens"
    cards = "".join([
        _card("TTFT (prefill)", _ms(summary.ttft_s), "prefill"),
        _card("TPOT (decode)", _ms(summary.tpot_s), "decode"),
        _card("ITL p50 / p99", f"{_ms(summary.itl_p50_s)} / {_ms(summary.itl_p99_s)}", "decode"),
        _card("End-to-end", f"{summary.total_s:,.2f} s"),
        _card("Tokens in / out", f"{summary.prompt_tokens:,} / {summary.output_tokens:,}"),
        _card("Prefill speed", _rate(summary.prefill_tokens_per_s, "tok/s"), "prefill"),
        _card("Decode speed", _rate(summary.decode_tokens_per_s, "tok/s"), "decode"),
        _card("Prefill share", f"{summary.prefill_share:.0%}" if math.isfinite(summary.prefill_share) else "n/a"),
    ])
    sharing = bridge_sharing(trace)
    shared = f"<p>{_inline(diagnosis.sharing_markdown(sharing))}</p>" if sharing and sharing.shared_steps else ""
    queued = (f"<p>Before it started, this request waited {summary.queue_s:,.2f} s for the shared engine; that queue "
              "time is in none of the numbers above.</p>" if summary.queue_s >= 0.05 else "")
    env = trace.env
    machine = (f"kernels: {env.get('kernels', 'plain')} · "
               f"torch threads: {env.get('threads', '?')} · torch {env.get('torch', '?')} · source: {runs.origin(trace)} · "
               f"stopped by: {trace.stop_reason} · warm-up {trace.warmup_seconds:.3f} s and attention capture "
               f"{trace.capture_seconds:.3f} s excluded")
    return _document(f"Two Bends run report: {heading}", f"""<h1>Two Bends — run report</h1>
<p class="sub">{html.escape(heading)}<br>{html.escape(describe(trace))}<br>{html.escape(machine)}</p>
<div class="cards">{cards}</div>
{charts}
{queued}{shared}
{_diagnosis_html(summary)}
<h2>What was sent and what came back</h2>
{_text_block(f"The prompt ({trace.n_prompt} tokens)", trace.prompt_text)}
{_text_block(f"The generated text ({trace.n_output} tokens)", trace.text)}
{FOOTER}""")


FOOTER = """<footer>TTFT: request start to the first token (prefill + first sampling). ITL: the gap between consecutive tokens.
TPOT: (end-to-end − TTFT) / (output tokens − 1). Same definitions as vLLM's benchmarks.
Made with Two Bends: the valley is prefill, the bridge is decode.</footer>"""


def _document(title: str, body: str) -> str:
    """One self-contained page: Plotly's JavaScript inlined once, whatever the number of charts."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style><script>{get_plotlyjs()}</script></head>
<body>
{body}
</body></html>
"""


def _chart(fig) -> str:
    config = dict(displaylogo=False, responsive=True)
    return f'<div class="chart">{pio.to_html(fig, include_plotlyjs=False, full_html=False, config=config)}</div>'


def _side_rows(traces, summaries) -> str:
    """One row per measure, one column per run: the numbers a student compares, and each run's verdict."""
    def pct(v: float) -> str:
        return f"{v:.0%}" if math.isfinite(v) else "n/a"

    rows = [
        ("Prompt → output tokens", [f"{s.prompt_tokens:,} → {s.output_tokens:,}" for s in summaries]),
        ("TTFT (prefill)", [_ms(s.ttft_s) for s in summaries]),
        ("TPOT (decode)", [_ms(s.tpot_s) for s in summaries]),
        ("ITL p50 / p99", [f"{_ms(s.itl_p50_s)} / {_ms(s.itl_p99_s)}" for s in summaries]),
        ("Decode time", [_ms(s.decode_s) for s in summaries]),
        ("End-to-end", [f"{s.total_s:,.2f} s" if math.isfinite(s.total_s) else "n/a" for s in summaries]),
        ("Prefill share", [pct(s.prefill_share) for s in summaries]),
        ("Prefill speed", [_rate(s.prefill_tokens_per_s, "tok/s") for s in summaries]),
        ("Decode speed", [_rate(s.decode_tokens_per_s, "tok/s") for s in summaries]),
        ("Queue before start", [_ms(s.queue_s) for s in summaries]),
        ("Model · device", [f"{t.model} · {t.device} · {t.dtype}" for t in traces]),
        ("Source", [runs.origin_words(t) for t in traces]),
    ]
    body = "".join(f"<tr><td>{html.escape(k)}</td>{''.join(f'<td>{html.escape(v)}</td>' for v in vs)}</tr>"
                   for k, vs in rows)
    verdicts = "".join(f'<td class="verdict">{html.escape(diagnosis.diagnose(s).headline)}</td>' for s in summaries)
    return body + f"<tr><td>Verdict</td>{verdicts}</tr>"


def session_report(traces, title: str = "") -> str:
    """The handout for several runs: a side-by-side table, the phases compared, and each run's ITL chart."""
    traces = list(traces)
    if not traces:
        raise ValueError("a handout needs at least one run")
    summaries = [summarize(t) for t in traces]
    heading = title or f"{len(traces)} runs side by side"
    sub = [title] if title else []
    head = "".join(f"<th>Run {i}</th>" for i in range(1, len(traces) + 1))
    table = f'<div class="wide"><table class="side"><tr><th></th>{head}</tr>{_side_rows(traces, summaries)}</table></div>'
    compared = _chart(fig_timing.runs_figure(runs.runs_table(traces)))
    itl = "".join(
        f"<div><h3>Run {i}: {t.n_prompt:,} → {t.n_output:,} tokens</h3>"
        + _chart(fig_timing.itl_figure(t.prefill_seconds, [s.seconds for s in t.steps],
                                       stall_s=[s.stall_seconds for s in t.steps], riders=[s.riders for s in t.steps],
                                       height=320)) + "</div>"
        for i, t in enumerate(traces, start=1))
    models = sorted({describe(t) for t in traces})
    return _document(f"Two Bends handout: {heading}", f"""<h1>Two Bends — {len(traces)} runs side by side</h1>
<p class="sub">{'<br>'.join(html.escape(line) for line in sub + models)}</p>
<p>Each column is one run (its source row says where it was measured). Read TTFT against the prompt length
(the valley: the whole prompt in one pass) and TPOT against the output length (the bridge: one token per
crossing); the verdict row names the phase each request spent most of its time in.</p>
{table}
<h2>Time per phase, run by run</h2>
{compared}
<h2>Each run's tokens, one by one</h2>
<div class="grid">{itl}</div>
{FOOTER}""")
