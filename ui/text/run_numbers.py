"""What the story pages read from one run: its phase summary (TTFT, TPOT, ...), how it shared the bridge, and
a measured server's records as traces. Streamlit-free; pages call these instead of engine.core.metrics."""
from __future__ import annotations

from collections import Counter

from engine.core.metrics import PhaseSummary, bridge_sharing, summarize
from engine.core.trace import Trace
from engine.host.cpu_wait import DECODE_ALL_THREADS  # torch-free: the page's process does not import torch
from engine.serving.client.server_benchmark import trace_from_record
from engine.serving.scheduling.work import PENDING_DECODE_STEP, PENDING_KERNELS
from ui.text.diagnosis import sharing_markdown
from ui.text.phase_numbers import escape_markdown
from ui.text.runs import ORIGIN_WORDS, origin


def summary(trace: Trace) -> PhaseSummary:
    """The run's measured metrics, with vLLM's definitions (engine.core.metrics.summarize)."""
    return summarize(trace)


def provenance(trace: Trace, recorded_label: str = "") -> str:
    """Where the run's numbers come from, for its heading: a run measured by this dashboard's engine in this session,
    a recording read from a file (`recorded_label`: its title, machine and date), or a server measured over HTTP."""
    kind = origin(trace)
    if recorded_label and kind != "server":  # a run read back from a file, whichever engine measured it
        kind = "recording"
    words = ORIGIN_WORDS[kind]
    label = f": {escape_markdown(recorded_label)}" if kind == "recording" and recorded_label else ""
    return f"{words[0].upper()}{words[1:]}{label}."


def chart_note(trace: Trace) -> str:
    """What a chart's subtitle says for a run not measured by this dashboard's engine ('' for one that was): a chart
    saved as a PNG leaves the page's provenance line behind."""
    kind = origin(trace)
    if kind != "recording":
        return "measured over HTTP" if kind == "server" else ""
    recording = trace.settings.get("recording") or {}
    where = ", ".join(str(v) for v in (recording.get("machine"), recording.get("date")) if v)
    return f"a recording ({where})" if where else "a recording"


def sharing_note(trace: Trace) -> str | None:
    """Markdown saying how many of its decode steps this request shared the bridge with others; None if none."""
    sharing = bridge_sharing(trace)
    if sharing is None or not sharing.shared_steps:
        return None
    return sharing_markdown(sharing)


def server_traces(records: list[dict]) -> list[Trace]:
    """One Trace per request measured on an outside server, so the ledger's panels draw it."""
    return [trace_from_record(rec) for rec in records]


PAGE_VS_CLI = (
    "**How far the page's own work moves these numbers.** The model runs in the engine's own process, so the "
    "dashboard's Python is not in the timed path; but a browser drawing this page, Streamlit sending it and any other "
    "program share this machine's cores with the model. Each run measures that disturbance itself: the time its "
    "threads were ready to run while every core was busy elsewhere (Linux schedstat), stated under the metrics "
    "below. **Quiet timing** in the sidebar draws nothing while the model runs. To see the model with no page at "
    "all, run the same request from a terminal, `python -m engine generate --prompt TEXT --prompt-tokens N "
    "--max-new-tokens M --ignore-eos`, which prints the same metrics, and compare it with this page's runs against "
    "the run-to-run spread measured at the bottom of this page, not against one number. When students' browsers run "
    "on their own laptops, only Streamlit's share of the work stays on this machine."
)
QUIET_HINT_SHARE = 0.10  # offer quiet timing once the wait is this share of TPOT or more
FREE_SHARE = 0.03  # below this share the run had the cores to itself
# every thread's wait added, against the longest-waiting thread's, from which the page adds a second figure: past
# this ratio the longest alone would understate what the cores' other users took (docs/decisions/cpu-wait.md)
PARTNER_RATIO = 1.25


def cpu_wait_per_token(trace: Trace) -> float | None:
    """Seconds per decode step this run's threads waited for a CPU (schedstat); None when not measured."""
    if trace.source == "server" or trace.cpu_wait_seconds is None or not trace.steps:
        return None
    return trace.decode_cpu_wait_seconds / len(trace.steps)


def all_threads_per_token(trace: Trace) -> float | None:
    """Seconds per decode step with every thread's wait added; None when not recorded (older traces, no schedstat)."""
    per_token, total = cpu_wait_per_token(trace), trace.env.get(DECODE_ALL_THREADS)
    return None if per_token is None or total is None else total / len(trace.steps)


def partner_words(trace: Trace, short: bool = False) -> str:
    """' (up to N ms with every thread's wait added: ...)' where the threads waited at different moments, else ''.
    `short`: ', N ms with every thread's wait added' (no brackets: the run panel's line keeps its one bracket)."""
    per_token, every = cpu_wait_per_token(trace), all_threads_per_token(trace)
    if per_token is None or every is None or per_token <= 0 or every < PARTNER_RATIO * per_token:
        return ""
    if short:
        return f", {every * 1e3:,.1f} ms with every thread's wait added"
    return (f" (up to {every * 1e3:,.1f} ms with every thread's wait added: while one thread waits, its partner "
            "spins at the next barrier, so a step loses between the two)")


def cpu_wait_note(trace: Trace, quiet: bool = False) -> str:
    """Markdown next to TTFT/TPOT: how long this run waited for a CPU, per token and in prefill, or why unknown.

    `quiet`: the run was timed with quiet timing on (nothing drawn while it ran)."""
    if trace.source == "server":
        return ("**CPU wait: not known for a run measured over HTTP** (the server's own machine would have to "
                "measure it); its TTFT and TPOT include whatever else ran there.")
    if trace.cpu_wait_seconds is None:
        why = trace.cpu_wait_note or "this run was recorded before the engine measured it"
        where = "the machine that recorded it" if origin(trace) == "recording" else "this machine"
        return f"**CPU wait: not measured** — {why}. Other programs on {where} may have stretched these timings."
    steps = len(trace.steps)
    per_token = cpu_wait_per_token(trace)
    ttft_ms, wait_ttft_ms = trace.prefill_seconds * 1e3, trace.prefill_cpu_wait_seconds * 1e3
    how = (f"Measured in this run with Linux's schedstat: the time the engine's threads were ready to run but every "
           f"core was busy elsewhere (per step, the longest-waiting thread). How much of that wait lengthened the step "
           f"depends on when it fell, so the wait is stated beside the timings, never subtracted from them; reading it "
           f"cost {trace.cpu_wait_read_seconds * 1e3:,.2f} ms in all, outside every timing.")
    prefill = f"{wait_ttft_ms:,.1f} ms of TTFT's {ttft_ms:,.1f} ms"
    if per_token is None:  # a single-token run: only prefill was timed
        return f"**This run waited for a CPU during prefill: {prefill}.** {how}"
    tpot_ms = trace.decode_seconds / steps * 1e3
    share = per_token * 1e3 / tpot_ms if tpot_ms > 0 else 0.0
    if share < FREE_SHARE:
        return (f"**This run had the CPU to itself**: it waited {per_token * 1e3:,.1f} ms per token for a core "
                f"({share:.0%} of TPOT) and {prefill}. These timings are the model's own. {how}")
    who = ("other programs held the cores (quiet timing was on, so not this page's drawing)" if quiet else
           "your browser was drawing this page, Streamlit was sending it, or other programs held the cores")
    if background := background_work(trace):
        who = f"{background}; besides, {who}"
    text = (f"**This run waited {per_token * 1e3:,.1f} ms per token for a CPU**{partner_words(trace)}: {who}. That is {share:.0%} of its "
            f"TPOT of {tpot_ms:,.1f} ms (with the whole wait taken off, about **{tpot_ms - per_token * 1e3:,.1f} "
            f"ms**: an estimate), and "
            f"{prefill}. {how}")
    text += threads_sentence(trace)
    if share >= QUIET_HINT_SHARE and not quiet:
        text += (" For cleaner timings turn on **Quiet timing** in the sidebar: no live chart and no streamed text "
                 "while the model runs, both drawn when it ends.")
    return text


def threads_sentence(trace: Trace) -> str:
    """' The engine changed its thread count while decoding (...): why.' when it did, else ''."""
    if not trace.threads_note:
        return ""
    counts = Counter(step.threads for step in trace.steps if step.threads)
    ran = ", ".join(f"{n} step(s) with {t} thread(s)" for t, n in sorted(counts.items(), reverse=True))
    return (f" To lose less to the wait, the engine chose fewer threads by measurement ({ran}): "
            f"{trace.threads_note}.")


def cpu_wait_label(trace: Trace) -> str:
    """A few words for the run panel's 'Run finished' line: ', waited for a CPU N ms per token, M ms in prefill',
    or '' when not measured."""
    per_token = cpu_wait_per_token(trace)
    if trace.source == "server" or trace.cpu_wait_seconds is None:
        return ""
    tokens = "" if per_token is None else f"{per_token * 1e3:,.1f} ms per token{partner_words(trace, short=True)}, "
    return f", waited for a CPU {tokens}{trace.prefill_cpu_wait_seconds * 1e3:,.1f} ms in prefill"


def finished_label(trace: Trace) -> str:
    """The run panel's line once a run ended (benchmarks/loadtest.py reads its numbers back: a test keeps them in step)."""
    return (f"Run finished: {trace.n_prompt} → {trace.n_output} tokens, TTFT {trace.prefill_seconds * 1000:,.0f} ms, "
            f"total {trace.total_seconds:,.2f} s{cpu_wait_label(trace)} (queue {trace.queue_seconds:.2f} s, warm-up "
            f"{trace.warmup_seconds:.2f} s and attention capture {trace.capture_seconds:.2f} s not counted)")


def cpu_wait_caption(trace: Trace) -> str | None:
    """One line under Home's TTFT/TPOT: the CPU wait per token when it mattered; None when small or not known."""
    per_token = cpu_wait_per_token(trace)
    tpot = trace.decode_seconds / len(trace.steps) if trace.steps else 0.0
    if per_token is None or tpot <= 0 or per_token / tpot < FREE_SHARE:
        return None
    who = background_work(trace) or "other programs, most likely your browser drawing this page, held the cores"
    fewer = " The engine ran on fewer threads while they did." if trace.threads_note else ""
    return (f"This run waited {per_token * 1e3:,.1f} ms per token for a CPU ({per_token / tpot:.0%} of TPOT)"
            f"{partner_words(trace)}: {who}."
            f"{fewer} The Timing page says more.")


def background_work(trace: Trace) -> str | None:
    """The engine's own start-up work that ran beside this run (its Trace's env["backends"]["pending"]), in words;
    else None."""
    pending = (trace.env.get("backends") or {}).get("pending", "")
    if pending == PENDING_KERNELS:
        return "the engine was still preparing its fast kernels in the background, on the same cores"
    if pending == PENDING_DECODE_STEP:
        return "the engine was still compiling its decode step in the background, on the same cores"
    return None
