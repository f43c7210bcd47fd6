"""Re-record the example traces shipped in assets/traces/ with the real bundled SmolLM2, on this machine.

Usage (from the project root): .venv/bin/python -m benchmarks.record_traces [--device cpu] [--only NAME]

Three runs that show the two bends from different sides, each saved as a Trace JSON file the dashboard
replays with no model loaded (and `python -m engine show FILE` summarises):
  short-prompt-long-answer   the chat question, chat template, up to 160 new tokens: the bridge dominates
  long-prompt-short-answer   the summarisation article fitted to 512 tokens, 8 new tokens: the valley dominates
  batch-four-riders          four requests in the scheduler's batch mode (continuous batching), the first one's
                             trace: its decode steps share the bridge with up to four riders, and stall while
                             the later requests' prompts cross the valley
Attention is captured after timing (untimed, like every dashboard run) for the evenly spaced layers that fit
RECORD_BUDGET_BYTES, so each file stays a few MB. Files record model, device, dtype, machine and date.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from engine.core.capture import capture_attention, layers_within_budget
from engine.core.generate import generate
from engine.core.metrics import format_summary, summarize
from engine.core.sampling_params import SamplingParams
from engine.core.trace_file import describe, load_trace, save_trace
from engine.host.run_watch import RunWatch
from engine.loading.loader import load_model
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import ModelSpec, Request, result_of
from ui.text import prompts

ROOT = Path(__file__).resolve().parent.parent

OUT = ROOT / "assets" / "traces"
MODEL = DEFAULT_MODEL
RECORD_BUDGET_BYTES = 3 * 2**20  # float16 captures kept per file (a dashboard run keeps up to 8 MiB)


def recapture(lm, trace) -> None:
    """Keep the attention of the evenly spaced layers that fit the record budget (one untimed pass)."""
    layers = layers_within_budget(lm.config, trace.n_prompt, trace.n_output, budget=RECORD_BUDGET_BYTES)
    started = time.perf_counter()
    trace.attention = capture_attention(lm, trace.prompt_ids, trace.output_ids, layers)
    trace.capture_seconds = time.perf_counter() - started


def short_prompt_long_answer(lm, device: str):
    text = prompts.example("chat").text
    trace = generate(lm, text, 160, chat=True, watch=RunWatch())  # a Run's threads and CPU wait, as Home's
    recapture(lm, trace)
    return trace, "Short prompt, long answer (chat question, greedy)"


def long_prompt_short_answer(lm, device: str):
    fitted = prompts.fit_prompt_to_tokens(lm.tokenizer, prompts.example("summarisation").text, 512)
    trace = generate(lm, fitted.ids, 8, watch=RunWatch())
    trace.prompt_text = fitted.text
    recapture(lm, trace)
    return trace, "Long prompt, short answer (article fitted to 512 tokens, greedy)"


def batch_four_riders(lm, device: str):
    """Four requests through the scheduler in batch mode, 0.4 s apart; the first one's trace is kept."""
    spec = ModelSpec(MODEL, device, "float32")
    already_loaded = ModelPool(loader=lambda *args, **kwargs: lm)  # the model this script loaded, not a second one
    scheduler = Scheduler("batch", max_batch=4, pool=already_loaded).start()
    texts = [prompts.example(key).text for key in ("translation", "chat", "code", "summarisation")]
    requests = []
    for i, text in enumerate(texts):
        ids = prompts.fit_prompt_to_tokens(lm.tokenizer, text, 96 if i == 0 else 48 + 32 * i).ids
        req = Request(model=spec, prompt_ids=ids, max_new_tokens=64 if i == 0 else 40, prompt_text=lm.tokenizer.decode(ids),
                      params=SamplingParams(ignore_eos=True))  # full-length answers: the riders stay on the bridge together
        requests.append(scheduler.submit(req))
        time.sleep(0.4)
    traces = [result_of(req, timeout=600) for req in requests]
    scheduler.stop()
    trace = traces[0]
    trace.settings["scheduler"] = "batch"
    recapture(lm, trace)
    return trace, "Class server, batch mode: 4 requests share the bridge (first request's trace)"


RECORDINGS = {
    "short-prompt-long-answer": short_prompt_long_answer,
    "long-prompt-short-answer": long_prompt_short_answer,
    "batch-four-riders": batch_four_riders,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu (the shipped traces), or cuda on a GPU machine")
    ap.add_argument("--only", choices=list(RECORDINGS), help="record just this one")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on this shared 2-core VM, 2 threads competing with other work "
                         "made prefill ~9x slower; 0 = torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(MODEL, device=args.device, dtype="float32")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, record in RECORDINGS.items():
        if args.only and name != args.only:
            continue
        trace, title = record(lm, args.device)
        trace.settings.pop("model_spec", None)
        suffix = "" if args.device == "cpu" else f"-{args.device}"
        path = save_trace(trace, out / f"{name}{suffix}.json", title)
        back = load_trace(path)  # the file passes the same checks as any upload
        riders = max((s.riders for s in back.steps), default=1)
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size / 2**20:.1f} MB, "
              f"{describe(back)}, layers {back.attention.layers}, most riders {riders}")
        print(format_summary(summarize(back)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
