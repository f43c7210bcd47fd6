"""Fair to every student, measured: a second session's default run while the largest lab runs
(the bound: its first token within 2x its quiet TTFT plus one lab slice).

Starts the engine's scheduler (as the dashboard's worker runs it), measures a default run's TTFT as a student sees
it (submit to first token: queue wait + prefill) on a quiet engine, then starts the largest lab a room allows (a
prompt-length sweep up to 2048 tokens) and, while it runs, submits the same run after several of its points.
Prints each TTFT against the quiet one and the sweep's slices (how long it held the engine between yield points:
engine/serving/scheduling/slices.py). Target: TTFT <= 2 x quiet + one slice. Exit code 1 when a run misses it.

    .venv/bin/python -m benchmarks.fairness                 # SmolLM2-135M on this machine (queue mode)
    .venv/bin/python -m benchmarks.fairness --model tiny-llama --mode batch
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from engine.core.prompting import SWEEP_TEXT
from engine.core.sampling_params import SamplingParams
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.scheduling import lab_jobs
from engine.serving.scheduling.work import FINAL, FirstToken, Job, ModelSpec, Progress, Request, Started, result_of
from engine.serving.scheduling.worker import LocalService, ServiceOptions

SWEEP = [16, 32, 64, 128, 256, 512, 1024, 2048]  # the Sweep lab's choices (pages/labs/lab_sweeps.py), all of them
PROMPT_TOKENS, OUTPUT_TOKENS = 64, 32  # the dashboard's default run (ui/controls/widgets.py)


def student_run(service, spec: ModelSpec, prompt_ids: list[int], n_out: int) -> tuple[float, float]:
    """Seconds from submit to the first token, as the student's page sees it (queue wait included), and the wait."""
    req = Request(model=spec, prompt_ids=list(prompt_ids), max_new_tokens=n_out, params=SamplingParams(ignore_eos=True))
    sent = time.perf_counter()
    service.submit(req)
    first, waited = None, 0.0
    while True:
        event = req.events.get(timeout=600)
        if isinstance(event, Started):
            waited = event.queue_seconds
        if isinstance(event, FirstToken) and first is None:
            first = time.perf_counter() - sent
        if isinstance(event, FINAL):
            if first is None:
                raise SystemExit(f"the student's run failed: {getattr(event, 'message', event)}")
            return first, waited


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--mode", default="queue", choices=["queue", "batch"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--quiet-runs", type=int, default=3)
    args = ap.parse_args()

    spec = ModelSpec(args.model, "auto", "float32")
    service = LocalService(ServiceOptions(mode=args.mode, threads=args.threads, preload=spec))
    try:
        info = result_of(service.submit(Job(model=spec, name=lab_jobs.MODEL_DESCRIBE.name, args=(spec,))), timeout=600)
        text_ids = info.tokenizer.encode(SWEEP_TEXT, add_special_tokens=False)
        prompt = (text_ids * (PROMPT_TOKENS // len(text_ids) + 1))[:PROMPT_TOKENS]
        student_run(service, spec, prompt, OUTPUT_TOKENS)  # warm-up, not counted
        quiet = statistics.median(student_run(service, spec, prompt, OUTPUT_TOKENS)[0] for _ in range(args.quiet_runs))
        print(f"model {info.name} on {info.device}, {args.mode} mode; default run {PROMPT_TOKENS} → {OUTPUT_TOKENS} tokens")
        print(f"quiet TTFT (submit → first token, median of {args.quiet_runs}): {quiet * 1000:,.0f} ms")

        before = len(service.scheduler.slices)
        sweep = service.submit(Job(model=spec, name=lab_jobs.PROMPT_SWEEP.name, args=(SWEEP, 8), label="prompt sweep"))
        busy: list[tuple[int, float, float]] = []  # (points done when the run was submitted, its TTFT, its queue wait)
        points = 0
        while True:
            event = sweep.events.get(timeout=1200)
            if isinstance(event, Progress) and event.payload is not None:
                points = event.payload.done
                if points < len(event.payload.planned):  # the sweep still has points to go: a student presses Run now
                    busy.append((points, *student_run(service, spec, prompt, OUTPUT_TOKENS)))
            if isinstance(event, FINAL):
                break
        slices = list(service.scheduler.slices)[before:]  # slices[k]: the stretch that ended after point k + 1
    finally:
        service.close()

    longest = max(slices)
    print(f"prompt sweep {SWEEP[0]}…{SWEEP[-1]} tokens ({len(slices) - 1} points fit the model); slices (s): "
          + ", ".join(f"{s:.2f}" for s in slices) + f"; longest {longest:.2f} s")
    ok = True
    for done, ttft, waited in busy:
        # the run arrives just after a point: the sweep's next point (the next slice) may run first
        bound = 2 * quiet + slices[min(done, len(slices) - 1)]
        ok &= ttft <= bound
        print(f"  run during the sweep (after point {done}): TTFT {ttft * 1000:,.0f} ms = {ttft / quiet:,.1f} x quiet; "
              f"(queue wait {waited * 1000:,.0f} ms); bound 2 x quiet + that slice = {bound * 1000:,.0f} ms: "
              + ("within" if ttft <= bound else "MISSED"))
    print("fair: every run within 2 x quiet TTFT + one slice" if ok else "NOT fair: a run missed the bound")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
