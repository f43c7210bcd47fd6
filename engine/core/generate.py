"""Prefill once, then decode one token per step: the two phases of engine/core/reference.py, timed into a Trace.

`prefill` pushes every prompt token through the model in ONE forward pass (wide, parallel,
compute-bound). `decode_step` pushes exactly one new token per sequence (narrow, serial, reads all
weights and the whole KV cache each time: memory-bound). Both go through the fast paths the model chose at
load (`lm.forward`, engine/core/backends.py). `decode_loop` is the timed serial loop of generate, the prefix
cache and the labs' decode timings (continuous batching and speculative decoding time their own steps). Each
batch row is a Sequence (engine/core/sequence.py), which says when it ends. Timestamps follow vLLM's metric
meanings and, on CUDA, are taken after `torch.cuda.synchronize()` (engine/core/clock.py). A caller may hand a
run a `watch` (engine/host/run_watch.py): it measures how long the threads waited for a CPU in each timed
interval, and may change the threads between steps; the core itself neither measures nor steers the machine.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Protocol

import torch

from engine.core.clock import now
from engine.core.kv_cache import KVCache
from engine.core.prompting import check_batch_size, check_lengths, encode_prompt
from engine.core.recorder import add_attention, finish_trace, start_trace
from engine.core.sampling import make_generator, sample_with
from engine.core.sampling_params import SamplingParams
from engine.core.sequence import CANCELLED, EOS, Sequence
from engine.core.trace import DecodeStep, Trace
from engine.errors import EngineError

StepCallback = Callable[[Trace], bool | None]  # return False to stop early (e.g. a Cancel button)
StepMaker = Callable[[object, KVCache], Callable[[torch.Tensor], torch.Tensor]]  # (lm, cache) -> step(token) -> logits


class Watch(Protocol):
    """What a caller outside the core watches of one run, between its timed intervals (engine/host/run_watch.py)."""

    last_wait: float  # seconds the threads waited for a CPU in the latest interval (0 where not measured)

    def begin(self, trace: Trace, device: torch.device) -> None: ...  # before the prefill (may set torch's threads)

    def mark(self) -> None: ...  # right before a timed interval

    def lap(self) -> float: ...  # right after it: its CPU wait, also kept in last_wait

    def after_prefill(self) -> None: ...

    def after_step(self, seconds: float, wait: float) -> None: ...  # between decode steps (may change the threads)

    def end(self) -> None: ...  # after the run, whatever happened: the threads as they were

    def record(self, trace: Trace) -> None: ...  # a finished run's CPU wait and thread notes into its trace


@torch.inference_mode()
def prefill(lm, input_ids: torch.Tensor, cache: KVCache, *, all_logits: bool = False) -> torch.Tensor:
    """All T prompt tokens (B, T) in one forward pass; logits (B, V), or (B, T, V) with all_logits."""
    return lm.forward(input_ids, cache, all_logits=all_logits)[0]


@torch.inference_mode()
def decode_step(lm, token_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Exactly one new token per sequence, (B,) or (B, 1) -> logits (B, V)."""
    return lm.forward(token_ids.reshape(-1, 1), cache)[0]  # (B, 1) in


def new_cache(lm, batch: int, max_len: int) -> KVCache:
    return KVCache(lm.config, batch, max_len, lm.dtype, lm.device)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


@torch.inference_mode()
def decode_loop(lm, token: torch.Tensor, cache: KVCache, max_steps: int, *,
                choose: Callable[[torch.Tensor], torch.Tensor] = greedy, step=None,
                after_step: Callable[[torch.Tensor, float], bool] | None = None,
                watch: Watch | None = None) -> list[float]:
    """The bridge: feed `token` (B,), choose the next from the logits, `max_steps` times or until
    `after_step(token, seconds)` returns False. Returns each step's seconds (pass + choice, host-side
    token ready). `step` replaces `decode_step` (e.g. a CUDA-graph replay). With a `watch`, each step's
    CPU wait is in `watch.last_wait` when `after_step` runs (its reads lie outside the timed interval), and
    `torch.get_num_threads()` is the threads the step ran with; the watch may change them for the next step."""
    step = step or (lambda t: decode_step(lm, t, cache))
    seconds: list[float] = []
    for _ in range(max_steps):
        if watch is not None:
            watch.mark()
        start = now(lm.device)
        token = choose(step(token))  # (B,)
        token.tolist()  # the token exists on the host: the step is over
        seconds.append(now(lm.device) - start)
        wait = watch.lap() if watch is not None else 0.0
        if after_step is not None and after_step(token, seconds[-1]) is False:
            break
        if watch is not None:
            watch.after_step(seconds[-1], wait)
    return seconds


# warm-up state lives here, not on the shared model: the lock makes concurrent first calls wait for one warm-up
_warm_lock = threading.Lock()
_warmed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> batch sizes already warmed


def warm_up(lm, batch: int) -> float:
    """Run a tiny prefill and two decode steps once per model and batch size; return the seconds it took."""
    with _warm_lock:
        done = _warmed.setdefault(lm.model, set())  # (batch, backends): plain and fast share the model, not their paths
        if (batch, id(lm.backends)) in done:
            return 0.0
        start = now(lm.device)
        cache = new_cache(lm, batch, 16)
        ids = torch.zeros(batch, 8, dtype=torch.long, device=lm.device)
        prefill(lm, ids, cache)
        decode_loop(lm, ids[:, 0], cache, 2)
        done.add((batch, id(lm.backends)))
        return now(lm.device) - start


def generate(lm, prompt: str | list[int], max_new_tokens: int, params: SamplingParams | None = None, *,
             chat: bool = False, batch_size: int = 1, capture_attention: bool = False, capture_layers=None,
             on_step: StepCallback | None = None, on_capture: Callable[[Trace], None] | None = None,
             warmup: bool = True, make_step: StepMaker | None = None, watch: Watch | None = None,
             **sampling) -> Trace:
    """Generate for one prompt (text or ids), replicated `batch_size` times; see `generate_batch`.

    Sampling settings come as a SamplingParams or as its field names (temperature=..., seed=...).
    """
    ids = encode_prompt(lm, prompt, chat)
    batch_size = check_batch_size(batch_size)
    max_new_tokens = check_lengths(lm, len(ids), max_new_tokens)
    params = (params or SamplingParams(**sampling)).checked(lm.config.vocab_size)
    trace = _run(lm, [ids] * batch_size, max_new_tokens, params, chat, capture_attention, capture_layers,
                 on_step, on_capture, warmup, make_step, watch)
    trace.prompt_text = prompt if isinstance(prompt, str) else lm.tokenizer.decode(ids)
    return trace


def generate_batch(lm, prompts: list[list[int]], max_new_tokens: int, params: SamplingParams | None = None, *,
                   capture_attention: bool = False, capture_layers=None, on_step: StepCallback | None = None,
                   on_capture: Callable[[Trace], None] | None = None, warmup: bool = True,
                   make_step: StepMaker | None = None, chat: bool = False, watch: Watch | None = None,
                   **sampling) -> Trace:
    """B prompts of equal token length: one batched prefill, then batched decode steps.

    A sequence that produced an end token stops growing (its text ends there) while the others go on.
    With capture_attention, `on_capture(trace)` is called once timing is over, just before the
    (untimed) attention capture of `capture_layers` (default: all) starts; a cancelled run skips both.
    `make_step(lm, cache)` builds the decode step after the first token, e.g. a CUDA-graph replay
    (engine/techniques/cuda_graphs.py); the time it takes counts as warm-up, not as a decode step.
    A `watch` (engine/host/run_watch.py) measures the run's CPU wait and may change the threads between steps.
    """
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise EngineError("give at least one prompt")
    prompts = [encode_prompt(lm, p) for p in prompts]
    if len({len(p) for p in prompts}) != 1:
        raise EngineError("all prompts of a batch must have the same number of tokens (no padding here); "
                          "the scheduler's batch mode serves prompts of different lengths")
    check_batch_size(len(prompts))
    max_new_tokens = check_lengths(lm, len(prompts[0]), max_new_tokens)
    params = (params or SamplingParams(**sampling)).checked(lm.config.vocab_size)
    return _run(lm, prompts, max_new_tokens, params, chat, capture_attention, capture_layers, on_step, on_capture,
                warmup, make_step, watch)


@torch.inference_mode()
def _run(lm, prompts: list[list[int]], max_new_tokens: int, params: SamplingParams, chat: bool,
         capture_attention: bool, capture_layers, on_step: StepCallback | None,
         on_capture: Callable[[Trace], None] | None, warmup: bool, make_step: StepMaker | None,
         watch: Watch | None) -> Trace:
    """The run itself, on checked input: one Sequence per row, timed prefill, then the decode loop."""
    B, T = len(prompts), len(prompts[0])
    device = lm.device
    on_cpu = device.type == "cpu"
    settings = dict(params.as_dict(), max_new_tokens=max_new_tokens, chat=chat, capture_attention=capture_attention,
                    decode_step=getattr(make_step, "__name__", "custom") if make_step else "eager",
                    adaptive_threads=False)
    trace = start_trace(lm, prompts[0], settings, batch_size=B, warmup_seconds=warm_up(lm, B) if warmup else 0.0)
    gen = make_generator(params.seed, device)
    seqs = [Sequence(p, max_new_tokens, params, lm.config.eos_token_ids) for p in prompts]
    trace.output_ids = seqs[0].output_ids
    cache = new_cache(lm, B, T + max_new_tokens)

    def choose(logits: torch.Tensor) -> torch.Tensor:
        return sample_with(params, logits, gen)  # (B,)

    def keep(token: torch.Tensor) -> bool:
        """Give each unfinished sequence its new token; False when the run should stop."""
        for seq, t in zip(seqs, token.tolist()):
            if not seq.finished:
                seq.append(t)
        if all(seq.stop_reason == EOS for seq in seqs):
            trace.stop_reason = EOS
            return False
        if on_step is not None:
            trace.output_tokens.append(seqs[0].latest_piece(lm.tokenizer))
            if on_step(trace) is False:
                for seq in seqs:
                    seq.cancel()
                trace.stop_reason = CANCELLED
                return False
        return not all(seq.finished for seq in seqs)  # else every row is over: some by eos, the rest by length

    try:
        if watch is not None:
            watch.begin(trace, device)
            watch.mark()
        start = now(device)
        token = choose(prefill(lm, torch.tensor(prompts, device=device), cache))  # (B,)
        token.tolist()  # the first token exists on the host: TTFT ends here
        trace.prefill_seconds = now(device) - start
        if watch is not None:
            trace.prefill_cpu_wait_seconds = watch.lap()
            watch.after_prefill()
        if keep(token):
            step = None
            if make_step is not None:
                build_start = now(device)
                step = make_step(lm, cache)
                trace.warmup_seconds += now(device) - build_start

            def after_step(token: torch.Tensor, seconds: float) -> bool:
                trace.steps.append(DecodeStep(seconds, cache.length, cache.nbytes_used, riders=B,
                                              cpu_wait_seconds=watch.last_wait if watch is not None else 0.0,
                                              threads=torch.get_num_threads() if on_cpu else 0))
                return keep(token)

            decode_loop(lm, token, cache, max_new_tokens - 1, choose=choose, step=step, after_step=after_step,
                        watch=watch)
    finally:
        if watch is not None:
            watch.end()
    if watch is not None:
        watch.record(trace)
    finish_trace(lm, trace, [seq.output_ids for seq in seqs], cache)
    if capture_attention and trace.stop_reason != CANCELLED:  # nobody waits for a cancelled run's pictures
        if on_capture is not None:
            on_capture(trace)
        add_attention(lm, trace, capture_layers)
    return trace


@torch.inference_mode()
def generate_no_cache(lm, prompt_ids: list[int], max_new_tokens: int,
                      on_step: StepCallback | None = None) -> Trace:
    """Reference path without a KV cache: every step re-runs the WHOLE sequence (greedy).

    Same tokens as `generate`, but step t costs a prefill of T+t tokens: the cache is what makes
    decode cheap per token.
    """
    prompt_ids = encode_prompt(lm, prompt_ids)
    max_new_tokens = check_lengths(lm, len(prompt_ids), max_new_tokens)
    device = lm.device
    trace = start_trace(lm, prompt_ids, dict(temperature=0.0, kv_cache=False, max_new_tokens=max_new_tokens))
    seq = Sequence(prompt_ids, max_new_tokens, eos_ids=lm.config.eos_token_ids)
    trace.output_ids = seq.output_ids
    while not seq.finished:
        ids = seq.prompt_ids + seq.output_ids
        start = now(device)
        cache = new_cache(lm, 1, len(ids))  # thrown away after this step
        token = int(greedy(prefill(lm, torch.tensor([ids], device=device), cache)))
        seconds = now(device) - start
        if not seq.output_ids:
            trace.prefill_seconds = seconds
        else:
            trace.steps.append(DecodeStep(seconds, len(ids), 0))
        if seq.append(token) == EOS:
            trace.stop_reason = EOS
        elif on_step is not None and on_step(trace) is False:
            seq.cancel()
            trace.stop_reason = CANCELLED
    return finish_trace(lm, trace, [seq.output_ids])
