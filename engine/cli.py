"""Command line: `python -m engine generate|show|bench|prepare`. Errors print one line, never a traceback."""
from __future__ import annotations

import argparse
import sys

from engine.errors import EngineError


def _progress(message: str, fraction: float) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m (bundled), gpt2, a HF id or a folder")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])


def cmd_generate(args) -> int:
    from engine.core.generate import generate
    from engine.core.metrics import format_summary, summarize
    from engine.core.prompting import fit_prompt_to_tokens
    from engine.loading.loader import load_model

    lm = load_model(args.model, args.device, args.dtype, progress=None if args.json else _progress)
    prompt = args.prompt
    if args.prompt_tokens is not None:  # exactly N tokens, trimmed or repeated like the dashboard's slider
        if args.prompt_tokens < 1:
            raise EngineError(f"--prompt-tokens must be at least 1 (got {args.prompt_tokens})")
        prompt = fit_prompt_to_tokens(lm.tokenizer, args.prompt, args.prompt_tokens).ids
    trace = generate(lm, prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                     top_p=args.top_p, seed=args.seed, ignore_eos=args.ignore_eos, chat=args.chat,
                     batch_size=args.batch_size, cuda_graphs=args.cuda_graphs)
    if args.json:
        print(trace.to_json())
        return 0
    print(trace.text)
    print()
    print(f"model {lm.name} on {lm.device} ({lm.dtype_name}), {trace.env['threads']} threads; "
          f"warm-up {trace.warmup_seconds * 1000:.0f} ms (excluded)")
    print(format_summary(summarize(trace)))
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
    from engine.loading.loader import load_model
    from engine.loading.model_store import ALIASES, BUNDLED, CACHE_FOLDER, cache_root, clean_stale_conversions

    cached = cache_root() / CACHE_FOLDER
    clean_stale_conversions()
    if ALIASES.get(args.model.lower()) == BUNDLED and (cached / "COMPLETE").is_file():
        print(f"bundled model already converted: {cached}")
        return 0

    lm = load_model(args.model, "cpu", "float32", progress=_progress)
    print(f"{lm.name}: {lm.config.n_params / 1e6:.1f} M parameters, loaded in {lm.load_seconds:.2f} s")
    return 0


def cmd_bench(args) -> int:
    from engine.labs.bench import run_bench

    run_bench(args)
    return 0


def main(argv: list[str] | None = None) -> int:
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
    _add_model_args(g)
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("show", help="print a recorded trace's phase summary (no model is loaded)")
    s.add_argument("file", help="a Trace JSON file (saved from the dashboard, or assets/traces/*.json)")
    s.set_defaults(func=cmd_show)

    p = sub.add_parser("prepare", help="convert and cache the bundled model")
    p.add_argument("--model", default="smollm2-135m")
    p.set_defaults(func=cmd_prepare)

    b = sub.add_parser("bench", help="our engine vs transformers, and both vs this machine's floors")
    _add_model_args(b)
    b.add_argument("--repeats", type=int, default=3, help="alternating rounds per measurement")
    b.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    b.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
