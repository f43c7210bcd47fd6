"""Chunked prefill's trade, measured: a long prompt joins decoding riders, with a token budget per step and without.

Seven riders decode on the bridge (continuous batching, engine/serving/scheduling/continuous_batch.py); then a
1024-token prompt joins. Without a budget its whole prefill runs alone, and every rider's next gap holds all of it
(the stall); with --max-num-batched-tokens its prompt goes in chunks that share the riders' steps, so each gap holds
one chunk. Prints, per budget: the riders' worst gap (ITL) from the join to the joiner's first token, their steady
gap before it, and the joiner's TTFT (from its admission; no queueing). The same Batch the scheduler's thread runs,
driven directly so the join lands in steady decoding. On a shared machine other programs stretch some runs: each
run's run-queue delay (schedstat: time our threads were ready but not running) is printed, and the table shows the
median and the least disturbed run per budget. Run it alone (timings), e.g. under flock:

    flock /tmp/tb/bench.lock .venv/bin/python -m benchmarks.chunked_prefill                  # SmolLM2, budgets none and 256
    .venv/bin/python -m benchmarks.chunked_prefill --budgets none,128,256,512 --repeats 3 --model tiny-llama
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks._servers import schedstat
from engine.loading.model_store import DEFAULT_MODEL  # torch-free: --help answers at once


def waited() -> float:
    """Seconds this process's threads have waited, runnable, for a CPU (Linux schedstat; 0 elsewhere)."""
    return sum(wait for _, wait in schedstat().values()) / 1e9


def one_run(lm, budget: int | None, riders: int, rider_prompt: int, joiner_prompt: int, steady: int) -> dict:
    """Riders decode `steady` steps, the joiner comes; stop one step after its first token. Seconds."""
    from engine.core.prompting import SWEEP_TEXT, fit_prompt_to_tokens
    from engine.core.sampling_params import SamplingParams
    from engine.serving.scheduling.continuous_batch import Batch
    from engine.serving.scheduling.work import ModelSpec, Request

    greedy = SamplingParams(ignore_eos=True)
    spec = ModelSpec(lm.name)
    ids = fit_prompt_to_tokens(lm.tokenizer, SWEEP_TEXT, joiner_prompt + rider_prompt * riders).ids
    batch = Batch(lm, max_batch=riders + 1, max_num_batched_tokens=budget)
    # the riders have long answers ahead (as many tokens as the joiner's prompt): the cache they reserve already
    # holds the joiner, so no cache growth at the join blurs the comparison (the riders are stopped long before)
    reqs = [Request(model=spec, prompt_ids=ids[joiner_prompt + i * rider_prompt:][:rider_prompt],
                    max_new_tokens=joiner_prompt, params=greedy) for i in range(riders)]
    for req in reqs:
        batch.admit(req, time.perf_counter())
    while any(seq.prefilling for seq in batch.seqs):  # the riders' own prompts (chunked too, with a budget)
        batch.step()
    for _ in range(steady):
        batch.step()
    mark = {id(seq): len(seq.trace.steps) for seq in batch.seqs}
    joiner = Request(model=spec, prompt_ids=ids[:joiner_prompt], max_new_tokens=8, params=greedy)
    delay = waited()
    batch.admit(joiner, time.perf_counter())
    mine = next(seq for seq in batch.seqs if seq.request is joiner)
    steps = 0
    while not mine.output_ids:  # a whole prefill is done inside admit: no step
        batch.step()
        steps += 1
    batch.step()  # the riders' gap that holds the joiner's last chunk (or its whole prefill) ends here
    delay = waited() - delay
    gaps = [s.seconds for seq in batch.seqs if seq is not mine for s in seq.trace.steps[mark[id(seq)]:]]
    before = [s.seconds for seq in batch.seqs if seq is not mine for s in seq.trace.steps[1:mark[id(seq)]]]
    for req in reqs + [joiner]:
        req.cancel()
    batch.cancel_marked()
    return dict(worst_itl=max(gaps), steady_itl=statistics.median(before), ttft=mine.trace.prefill_seconds,
                steps=steps, delay=delay)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budgets", default="none,256", help="comma-separated max_num_batched_tokens; 'none': whole prefill")
    ap.add_argument("--riders", type=int, default=7)
    ap.add_argument("--rider-prompt", type=int, default=32, help="prompt tokens of each rider")
    ap.add_argument("--joiner-prompt", type=int, default=1024)
    ap.add_argument("--steady", type=int, default=8, help="decode steps before the join")
    ap.add_argument("--repeats", type=int, default=3, help="runs per budget, interleaved; the median is shown")
    args = ap.parse_args()
    budgets = [None if b.strip() == "none" else int(b) for b in args.budgets.split(",")]
    import torch

    import engine

    lm = engine.load_model(args.model, device=args.device)
    print(f"{lm.name} on {lm.device} ({torch.get_num_threads()} threads): "
          f"{args.riders} riders decoding, then a {args.joiner_prompt}-token prompt joins", flush=True)
    one_run(lm, budgets[-1], args.riders, args.rider_prompt, 64, 2)  # warm-up: first-call costs belong to no budget
    runs: dict = {b: [] for b in budgets}
    for i in range(args.repeats):
        for b in budgets:
            r = one_run(lm, b, args.riders, args.rider_prompt, args.joiner_prompt, args.steady)
            runs[b].append(r)
            print(f"run {i + 1}, budget {_name(b)}: worst ITL {1e3 * r['worst_itl']:.0f} ms, TTFT {1e3 * r['ttft']:.0f} ms, "
                  f"steady ITL {1e3 * r['steady_itl']:.0f} ms, run-queue delay {1e3 * r['delay']:.0f} ms", flush=True)
    med = {b: {k: statistics.median(r[k] for r in runs[b]) for k in runs[b][0]} for b in budgets}
    calm = {b: min(runs[b], key=lambda r: r["delay"]) for b in budgets}  # the run other programs disturbed least
    for title, table in (("median", med), ("least disturbed run", calm)):
        base = table[budgets[0]]
        print(f"\n{title}:\n| max_num_batched_tokens | riders' worst ITL (ms) | riders' steady ITL (ms) | joiner's TTFT (ms) | "
              f"steps to its first token | run-queue delay (ms) | worst ITL vs {_name(budgets[0])} | TTFT vs {_name(budgets[0])} |")
        print("|---|---|---|---|---|---|---|---|")
        for b in budgets:
            m = table[b]
            print(f"| {_name(b)} | {1e3 * m['worst_itl']:.0f} | {1e3 * m['steady_itl']:.0f} | {1e3 * m['ttft']:.0f} | "
                  f"{m['steps']:.0f} | {1e3 * m['delay']:.0f} | {m['worst_itl'] / base['worst_itl']:.2f}x | "
                  f"{m['ttft'] / base['ttft']:.2f}x |")
    print(f"\n{args.repeats} interleaved runs per budget; ITL = one rider's gap between two tokens; run-queue delay: "
          "time the engine's threads waited for a CPU other programs held, from the join to the step after its first token")
    return 0


def _name(budget: int | None) -> str:
    return "none (whole prefill)" if budget is None else str(budget)


if __name__ == "__main__":
    sys.exit(main())
