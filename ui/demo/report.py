"""A one-page HTML report of a run for students to keep: key figures, the phase split, the ITL chart, the diagnosis.

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
from ui.text import diagnosis

MAX_TEXT_CHARS = 20_000  # prompt and output shown in the report (a 50 MB file could hold far more)

STYLE = f"""
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1rem; }}
h1 {{ margin-bottom: 0.2rem; }} .sub {{ color: #666; margin-top: 0; }}
.cards {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 0.8rem; margin: 1.2rem 0; }}
.card {{ border: 1px solid #ddd; border-radius: 8px; padding: 0.6rem 0.8rem; }}
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
    return (f"<h2>Diagnosis</h2><h3>{html.escape(d.headline)}</h3><p>{html.escape(d.details)}</p>"
            f"<p><b>Remedies that help this request:</b></p><ul>{helps}</ul>"
            f"<p><b>Remedies that would be wasted here:</b></p><ul>{wasted}</ul>")


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
    config = dict(displaylogo=False, responsive=True)
    charts = "".join(f'<div class="chart">{pio.to_html(f, include_plotlyjs=False, full_html=False, config=config)}</div>'
                     for f in figures)
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
               f"torch threads: {env.get('threads', '?')} · torch {env.get('torch', '?')} · source: {trace.source} · "
               f"stopped by: {trace.stop_reason} · warm-up {trace.warmup_seconds:.3f} s and attention capture "
               f"{trace.capture_seconds:.3f} s excluded")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Two Bends run report: {html.escape(heading)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style><script>{get_plotlyjs()}</script></head>
<body>
<h1>Two Bends — run report</h1>
<p class="sub">{html.escape(heading)}<br>{html.escape(describe(trace))}<br>{html.escape(machine)}</p>
<div class="cards">{cards}</div>
{charts}
{queued}{shared}
{_diagnosis_html(summary)}
<h2>What was sent and what came back</h2>
{_text_block(f"The prompt ({trace.n_prompt} tokens)", trace.prompt_text)}
{_text_block(f"The generated text ({trace.n_output} tokens)", trace.text)}
<footer>TTFT: request start to the first token (prefill + first sampling). ITL: the gap between consecutive tokens.
TPOT: (end-to-end − TTFT) / (output tokens − 1). Same definitions as vLLM's benchmarks.
Made with Two Bends: the valley is prefill, the bridge is decode.</footer>
</body></html>
"""
