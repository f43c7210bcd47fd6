"""Command line: `python -m engine generate|show|bench|prepare|serve|measure|plan`. Errors print one line, never a traceback."""
from __future__ import annotations

import argparse
import os
import sys

from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL


def _progress(message: str, fraction: float) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _add_model_args(p: argparse.ArgumentParser, kernels: bool = True) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"{DEFAULT_MODEL} (bundled), gpt2, a HF id or a folder")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    if kernels:
        p.add_argument("--kernels", default="fast", choices=["fast", "plain"],
                       help="fast (default): the best library matmul kernels for this device and dtype; plain: nn.Linear")


def cmd_generate(args) -> int:
    from engine.core.prompting import check_batch_size, check_max_new_tokens, check_text, fit_prompt_to_tokens
    from engine.core.sampling_params import SamplingParams

    # typos refused at once, before torch is imported and the model loaded (seconds), in the words generate() uses;
    # top_k's range names the vocabulary's size, so generate() checks top_k once the model is here
    SamplingParams(args.temperature, 0, args.top_p, args.seed, args.ignore_eos).checked()
    check_batch_size(args.batch_size)
    check_max_new_tokens(args.max_new_tokens)
    check_text(args.prompt)
    if args.prompt_tokens is not None and args.prompt_tokens < 1:
        raise EngineError(f"--prompt-tokens must be at least 1 (got {args.prompt_tokens})")

    from engine.core.generate import generate
    from engine.core.metrics import format_summary, summarize
    from engine.host.cpu_wait import summary_line
    from engine.host.run_watch import RunWatch
    from engine.loading.loader import load_model, set_threads
    from engine.techniques.cuda_graphs import graphed_steps

    set_threads(args.threads)
    lm = load_model(args.model, args.device, args.dtype, progress=None if args.json else _progress, kernels=args.kernels)
    prompt = args.prompt
    if args.prompt_tokens is not None:  # exactly N tokens, trimmed or repeated like the dashboard's slider
        prompt = fit_prompt_to_tokens(lm.tokenizer, args.prompt, args.prompt_tokens).ids
    trace = generate(lm, prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                     top_p=args.top_p, seed=args.seed, ignore_eos=args.ignore_eos, chat=args.chat,
                     batch_size=args.batch_size, make_step=graphed_steps(lm) if args.cuda_graphs else None,
                     watch=RunWatch(adaptive_threads=not args.fixed_threads))
    if args.json:
        print(trace.to_json())
        return 0
    print(trace.text)
    print()
    print(f"model {lm.name} on {lm.device} ({lm.dtype_name}, kernels {lm.kernels}), {trace.env['threads']} threads; "
          f"warm-up {trace.warmup_seconds * 1000:.0f} ms (excluded)")
    print(format_summary(summarize(trace)))
    print(summary_line(trace))
    if trace.threads_note:
        print(f"threads chosen by measurement: {trace.threads_note}")
    return 0


def cmd_show(args) -> int:
    """A recorded trace's text and phase summary, exactly as `generate` prints them; no model is loaded."""
    from engine.core.metrics import format_summary, summarize
    from engine.core.trace_file import describe, load_trace

    trace = load_trace(args.file)
    title = (trace.settings.get("recording") or {}).get("title")
    print(f"recorded run: {title + ' — ' if title else ''}{describe(trace)}")
    print(_printable(trace.text))
    print()
    print(_printable(f"model {trace.model} on {trace.device} ({trace.dtype}), {trace.env.get('threads', '?')} threads; "
                     f"warm-up {trace.warmup_seconds * 1000:.0f} ms (excluded)"))
    print(format_summary(summarize(trace)))
    return 0


def _printable(text: str) -> str:
    """A file's text without terminal control sequences (escape codes could rewrite the terminal)."""
    return "".join(ch if ch in "\n\t" or ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in text)


def cmd_prepare(args) -> int:
    """Convert and cache the bundled model ahead of time (the dashboard and tests call this)."""
    from engine.loading.cache_folder import clean_stale_conversions
    from engine.loading.model_store import ALIASES, BUNDLED, bundled_converted, bundled_folder

    clean_stale_conversions()
    if ALIASES.get(args.model.lower()) == BUNDLED and bundled_converted():
        print(f"bundled model already converted: {bundled_folder()}")  # no torch imported: dashboard.sh's every start
        return 0
    from engine.loading.loader import load_model

    lm = load_model(args.model, "cpu", "float32", progress=_progress)
    print(f"{lm.name}: {lm.config.n_params / 1e6:.1f} M parameters, loaded in {lm.load_seconds:.2f} s")
    return 0


def cmd_bench(args) -> int:
    from engine.labs.bench import run_bench

    run_bench(args)
    return 0


def cmd_serve(args) -> int:
    from engine.serving.scheduling.token_budget import check_token_budget

    check_token_budget(args.max_num_batched_tokens, args.max_batch)  # one line before importing, binding or loading
    from engine.serving.api_server.openai_server import serve

    serve(args)
    return 0


def cmd_measure(args) -> int:
    import json

    from engine.serving.client.benchmark_report import format_report
    from engine.serving.client.server_benchmark import Plan, run

    api_key = args.api_key or os.environ.get("TWO_BENDS_API_KEY", "")
    traffic = args.request_rate is not None or args.workload is not None
    if not traffic:
        extra = [f for f, v in (("--burstiness", args.burstiness), ("--prompt-spread", args.prompt_spread),
                                ("--output-spread", args.output_spread)) if v is not None]
        if extra:
            raise EngineError(f"{extra[0]} belongs to the traffic mode: give --request-rate (inf: a burst) or --workload")
        if args.prompt_tokens is None or args.max_new_tokens is None:
            raise EngineError("give --prompt-tokens and --max-new-tokens (or a traffic workload: --request-rate, --workload)")

    def show(rec: dict) -> None:
        if args.json:
            print(json.dumps(rec), flush=True)

    if traffic:
        return _measure_traffic(args, api_key, show)
    requests = 1 if args.requests is None else args.requests
    plan = Plan(args.url, args.prompt_tokens, args.max_new_tokens, args.model, requests, args.concurrency,
                args.shared_prefix, args.warmup, args.timeout, api_key)
    records, facts = run(plan, on_record=show)
    if not args.json:
        print(format_report(records, facts))
    return 0


def _measure_traffic(args, api_key: str, show) -> int:
    """measure's traffic mode: a workload's arrivals (vLLM's --request-rate, --burstiness) sent open-loop."""
    from engine.perfmodel.goodput import SLO
    from engine.perfmodel.workload import shaped
    from engine.serving.client.traffic_benchmark import TrafficPlan, format_traffic, run_traffic

    requests = args.requests if args.requests is not None or args.workload else 16  # a preset says how many
    workload = shaped(args.workload, request_rate=args.request_rate, burstiness=args.burstiness,
                      prompt_tokens=args.prompt_tokens, prompt_spread=args.prompt_spread,
                      output_tokens=args.max_new_tokens, output_spread=args.output_spread, num_requests=requests)
    plan = TrafficPlan(args.url, workload, args.seed, args.model, args.warmup, args.timeout, api_key,
                       SLO(args.slo_ttft_ms / 1000.0, args.slo_tpot_ms / 1000.0))
    records, facts = run_traffic(plan, on_record=show)
    if not args.json:
        print(format_traffic(records, facts))
    return 0


def cmd_plan(args) -> int:
    """The card model's TTFT, TPOT and bounds for a model on a card (an estimate; this machine's card is measured)."""
    import json

    from engine.perfmodel import card_model as cm
    from engine.perfmodel import plan_report
    from engine.perfmodel.cards import THIS_MACHINE, card
    from engine.perfmodel.model_shapes import model_shape

    shape = model_shape(args.model)
    if args.price is not None and not args.price >= 0:
        raise EngineError(f"--price must be a number >= 0 (per card-hour), not {args.price!r}")
    if args.gpu.lower() == THIS_MACHINE:
        import torch

        from engine.labs.hardware import card_of, measure_peaks

        if not args.json:
            print("measuring this machine's peaks (a 256 MiB read and copy, a matmul at the model's shapes)...",
                  file=sys.stderr, flush=True)
        the_card = card_of(measure_peaks("cpu", torch.float32, shape.config))
    else:
        the_card = card(args.gpu)
    setup = cm.Setup(shape.config, the_card, args.dtype, args.gpus, shape.name)
    plan = cm.plan(setup, args.prompt_tokens, args.output_tokens, args.batch, args.context)
    r = plan_report.report(plan, args.price)
    print(json.dumps(r, indent=1) if args.json else plan_report.text(r))
    return 0


def main(argv: list[str] | None = None) -> int:
    from engine.serving.api_server import WORKER_DEFAULT

    parser = argparse.ArgumentParser(prog="python -m engine", description="Two Bends inference engine")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text and print the per-phase timing summary")
    g.add_argument("--prompt", required=True)
    g.add_argument("--prompt-tokens", type=int, default=None,
                   help="send exactly N prompt tokens: the text trimmed or repeated (as the dashboard's slider does)")
    g.add_argument("--max-new-tokens", type=int, default=64)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--ignore-eos", action="store_true", help="keep going past the end-of-sequence token")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--batch-size", type=int, default=1, help="run the prompt as B identical sequences")
    g.add_argument("--cuda-graphs", action="store_true", help="replay decode steps from a CUDA graph (CUDA only)")
    g.add_argument("--json", action="store_true", help="print the whole Trace as JSON")
    g.add_argument("--threads", type=int, default=0,
                   help="torch threads for the model (default 0: every core; the dashboard's --model-threads)")
    g.add_argument("--fixed-threads", action="store_true",
                   help="keep every decode step at --threads (default: fewer threads while other programs hold "
                        "cores, chosen by measurement; see engine/host/thread_governor.py)")
    _add_model_args(g)
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("show", help="print a recorded trace's phase summary (no model is loaded)")
    s.add_argument("file", help="a Trace JSON file (saved from the dashboard, or assets/traces/*.json)")
    s.set_defaults(func=cmd_show)

    p = sub.add_parser("prepare", help="convert and cache the bundled model")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.set_defaults(func=cmd_prepare)

    b = sub.add_parser("bench", help="our engine (fast and plain kernels) vs transformers and vLLM, and this machine's floors")
    _add_model_args(b, kernels=False)
    b.add_argument("--repeats", type=int, default=3, help="alternating rounds per measurement")
    b.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    b.add_argument("--no-vllm", action="store_true", help="leave out the vLLM column even when its venv is there")
    b.add_argument("--no-llamacpp", action="store_true", help="leave out the llama.cpp column even when its venv is there")
    b.add_argument("--llamacpp-type", choices=("f32", "bf16", "f16", "q8_0"), default=None,
                   help="the GGUF llama.cpp runs (default: our --dtype's precision: f32, bf16 or f16)")
    b.add_argument("--remeasure-kernels", action="store_true", help="time the candidate matmul kernels again "
                   "(fast's choice is otherwise measured once per machine and cached beside the model cache)")
    b.add_argument("--json", metavar="PATH", help="also write every row's numbers to PATH as JSON")
    b.set_defaults(func=cmd_bench)

    s = sub.add_parser("serve", help="serve the engine over the OpenAI API (FastAPI + uvicorn, vLLM's metric names)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--api-key", default=None, help="clients must send 'Authorization: Bearer KEY' (vLLM's flag; "
                   "default: the environment's TWO_BENDS_API_KEY, else no key); /health and /metrics stay open")
    s.add_argument("--served-model-name", nargs="+", default=None, metavar="NAME",
                   help="the names clients may use, the first in answers and metrics (vLLM's flag; default: the "
                   "model's Hugging Face id, then --model)")
    s.add_argument("--mode", default="queue", choices=["queue", "batch", "disaggregated"],
                   help="queue: one request at a time (default); batch: continuous batching; disaggregated: "
                   "a prefill worker and a decode worker, the KV cache handed over")
    s.add_argument("--max-queue", type=int, default=64, help="waiting requests before new ones get 429")
    s.add_argument("--max-batch", type=int, default=8, help="sequences sharing a decode step in batch mode")
    s.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="batch mode: tokens per engine step (vLLM's name); a joining prompt is prefilled in chunks that "
                   "share steps with the riders' decode tokens (chunked prefill). Default: whole prefills")
    s.add_argument("--max-new-tokens", type=int, default=4096, help="most new tokens one request may ask for")
    s.add_argument("--threads", type=int, default=0, help="torch threads for the model (default 0: every core)")
    s.add_argument("--worker", default=WORKER_DEFAULT, choices=["process", "thread"],
                   help=f"run the scheduler in a child process or a thread of the server (default {WORKER_DEFAULT})")
    _add_model_args(s)
    s.set_defaults(func=cmd_serve)

    m = sub.add_parser("measure", help="time any OpenAI-compatible server (vLLM, llama.cpp, SGLang, TGI, Ollama, ours)")
    m.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)")
    m.add_argument("--model", default=None, help="model name on that server (default: the first it lists)")
    m.add_argument("--prompt-tokens", type=int, default=None, help="exact prompt length N in tokens (traffic: the mean)")
    m.add_argument("--max-new-tokens", type=int, default=None, help="output tokens M per request, ignore_eos (traffic: the mean)")
    m.add_argument("--requests", type=int, default=None, help="measured requests K (default 1; traffic: the preset's, or 16)")
    m.add_argument("--concurrency", type=int, default=1, help="requests in flight at once C (default 1)")
    m.add_argument("--shared-prefix", action="store_true", help="prompts share all but their last tokens "
                   "(default: each starts with its own tag, so no prefix cache helps)")
    m.add_argument("--warmup", type=int, default=1, help="requests sent first and excluded (default 1)")
    m.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for an answer (default 120)")
    m.add_argument("--json", action="store_true", help="one Trace-shaped JSON object per request, one per line")
    m.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY' (a server started with "
                   "--api-key; default: the environment's TWO_BENDS_API_KEY)")
    t = m.add_argument_group("traffic mode (vLLM's serving benchmark): requests sent at their arrival times, open loop")
    t.add_argument("--request-rate", type=float, default=None, help="requests per second (inf: all at once, a burst)")
    t.add_argument("--burstiness", type=float, default=None, help="gamma shape of the gaps: 1 = Poisson (default), "
                   "below 1 burstier, above 1 steadier")
    t.add_argument("--workload", default=None, choices=["summarisation", "chat", "code"],
                   help="a preset of lengths (and 1 request/s); the flags above and below change it")
    t.add_argument("--prompt-spread", type=float, default=None, help="log-normal sigma of the prompt lengths (0: all equal)")
    t.add_argument("--output-spread", type=float, default=None, help="log-normal sigma of the output lengths (0: all equal)")
    t.add_argument("--seed", type=int, default=0, help="the arrival sequence (the Traffic lab's seed gives the same one)")
    t.add_argument("--slo-ttft-ms", type=float, default=2000.0, help="goodput's TTFT objective (default 2000 ms)")
    t.add_argument("--slo-tpot-ms", type=float, default=200.0, help="goodput's TPOT objective (default 200 ms)")
    m.set_defaults(func=cmd_measure)

    pl = sub.add_parser("plan", help="the card model: TTFT, TPOT and what bounds them for a model on a card (an estimate)")
    pl.add_argument("--model", default="llama-2-7b", help="smollm2-135m, gpt2, llama-2-7b, llama-2-70b, llama-3.1-8b, "
                    "mistral-7b, ... (a bad key lists them)")
    pl.add_argument("--gpu", default="a100-80gb", help="a100-80gb, h100-sxm, h200, l4, l40s, rtx-4090, m3-max, "
                    "laptop-cpu, or this-cpu (measured now)")
    pl.add_argument("--dtype", default="float16", help="float32, float16, bfloat16, fp8, q8_0, q4_0")
    pl.add_argument("--gpus", type=int, default=1, help="cards in one tensor-parallel group (default 1)")
    pl.add_argument("--prompt-tokens", type=int, default=512)
    pl.add_argument("--output-tokens", type=int, default=128)
    pl.add_argument("--batch", type=int, default=1, help="sequences served together")
    pl.add_argument("--context", type=int, default=None, help="the decode step's context (default: prompt + output/2)")
    pl.add_argument("--price", type=float, default=None, help="price per card-hour: adds money to the cost lines")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.set_defaults(func=cmd_plan)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
