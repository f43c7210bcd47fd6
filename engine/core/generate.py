"""Prefill once, then decode one token per step: the two phases, timed separately, into a Trace.

`prefill` pushes every prompt token through the model in ONE forward pass (wide, parallel,
compute-bound). `decode_step` pushes exactly one new token per sequence (narrow, serial, reads all
weights and the whole KV cache each time: memory-bound). `decode_loop` is the one timed serial loop
everything uses (generate, bench, labs). Timestamps follow vLLM's metric meanings and, on CUDA, are
taken after `torch.cuda.synchronize()` (engine/core/clock.py).
"""
from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

import torch

from engine.core import capture
from engine.core.clock import now
from engine.core.kv_cache import KVCache
from engine.core.prompting import check_batch_size, check_lengths, encode_prompt
from engine.core.recorder import add_latest_piece, finish_trace, start_trace
from engine.core.sampling import SamplingParams, make_generator, sample_with
from engine.core.trace import DecodeStep, Trace
from engine.errors import EngineError

StepCallback = Callable[[Trace], bool | None]  # return False to stop early (e.g. a Cancel button)


@torch.inference_mode()
def prefill(lm, input_ids: torch.Tensor, cache: KVCache, *, all_logits: bool = False) -> torch.Tensor:
    """All T prompt tokens (B, T) in one forward pass; logits (B, V), or (B, T, V) with all_logits."""
    return lm.model(input_ids, cache, all_logits=all_logits)[0]


@torch.inference_mode()
def decode_step(lm, token_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Exactly one new token per sequence, (B,) or (B, 1) -> logits (B, V)."""
    return lm.model(token_ids.reshape(-1, 1), cache)[0]  # (B, 1) in


def new_cache(lm, batch: int, max_len: int) -> KVCache:
    return KVCache(lm.config, batch, max_len, lm.dtype, lm.device)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


@torch.inference_mode()
def decode_loop(lm, token: torch.Tensor, cache: KVCache, max_steps: int, *,
                choose: Callable[[torch.Tensor], torch.Tensor] = greedy, step=None,
                after_step: Callable[[torch.Tensor, float], bool] | None = None) -> list[float]:
    """The bridge: feed `token` (B,), choose the next from the logits, `max_steps` times or until
    `after_step(token, seconds)` returns False. Returns each step's seconds (pass + choice, host-side
    token ready). `step` replaces `decode_step` (e.g. a CUDA-graph replay)."""
    step = step or (lambda t: decode_step(lm, t, cache))
    seconds: list[float] = []
    for _ in range(max_steps):
        start = now(lm.device)
        token = choose(step(token))  # (B,)
        token.tolist()  # the token exists on the host: the step is over
        seconds.append(now(lm.device) - start)
        if after_step is not None and after_step(token, seconds[-1]) is False:
            break
    return seconds


# warm-up state lives here, not on the shared model: the lock makes concurrent first calls wait for one warm-up
_warm_lock = threading.Lock()
_warmed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> batch sizes already warmed


def warm_up(lm, batch: int) -> float:
    """Run a tiny prefill and two decode steps once per model and batch size; return the seconds it took."""
    with _warm_lock:
        done = _warmed.setdefault(lm.model, set())
        if batch in done:
            return 0.0
        start = now(lm.device)
        cache = new_cache(lm, batch, 16)
        ids = torch.zeros(batch, 8, dtype=torch.long, device=lm.device)
        prefill(lm, ids, cache)
        decode_loop(lm, ids[:, 0], cache, 2)
        done.add(batch)
        return now(lm.device) - start


def generate(lm, prompt: str | list[int], max_new_tokens: int, params: SamplingParams | None = None, *,
             chat: bool = False, batch_size: int = 1, capture_attention: bool = False, capture_layers=None,
             on_step: StepCallback | None = None, on_capture: Callable[[Trace], None] | None = None,
             warmup: bool = True, cuda_graphs: bool = False, **sampling) -> Trace:
    """Generate for one prompt (text or ids), replicated `batch_size` times; see `generate_batch`.

    Sampling settings come as a SamplingParams or as its field names (temperature=..., seed=...).
    """
    ids = encode_prompt(lm, prompt, chat)
    trace = generate_batch(lm, [ids] * check_batch_size(batch_size), max_new_tokens, params, **sampling,
                           capture_attention=capture_attention, capture_layers=capture_layers, on_step=on_step,
                           on_capture=on_capture, warmup=warmup, cuda_graphs=cuda_graphs, chat=chat)
    trace.prompt_text = prompt if isinstance(prompt, str) else lm.tokenizer.decode(ids)
    return trace


@torch.inference_mode()
def generate_batch(lm, prompts: list[list[int]], max_new_tokens: int, params: SamplingParams | None = None, *,
                   capture_attention: bool = False, capture_layers=None, on_step: StepCallback | None = None,
                   on_capture: Callable[[Trace], None] | None = None, warmup: bool = True, cuda_graphs: bool = False,
                   chat: bool = False, **sampling) -> Trace:
    """B prompts of equal token length: one batched prefill, then batched decode steps.

    A sequence that produced an end token stops growing (its text ends there) while the others go on.
    With capture_attention, `on_capture(trace)` is called once timing is over, just before the
    (untimed) attention capture of `capture_layers` (default: all) starts.
    cuda_graphs=True (CUDA only) replays each decode step from a captured CUDA graph; the capture
    happens after the first token and is counted as warm-up, not as a decode step.
    """
    params = (params or SamplingParams(**sampling)).checked(lm.config.vocab_size)
    if cuda_graphs and lm.device.type != "cuda":
        raise EngineError("CUDA graphs need a CUDA GPU; this model runs on " + lm.device.type)
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise EngineError("give at least one prompt")
    prompts = [encode_prompt(lm, p) for p in prompts]
    if len({len(p) for p in prompts}) != 1:
        raise EngineError("all prompts of a batch must have the same number of tokens (no padding here); "
                          "the scheduler's batch mode serves prompts of different lengths")
    B, T = check_batch_size(len(prompts)), len(prompts[0])
    max_new_tokens = check_lengths(lm, T, max_new_tokens)
    device = lm.device
    trace = start_trace(lm, prompts[0], dict(params.as_dict(), max_new_tokens=max_new_tokens, chat=chat,
                                             capture_attention=capture_attention, cuda_graphs=cuda_graphs),
                        batch_size=B, warmup_seconds=warm_up(lm, B) if warmup else 0.0)
    gen = make_generator(params.seed, device)
    eos = torch.tensor(lm.config.eos_token_ids or [-1], device=device)
    cache = new_cache(lm, B, T + max_new_tokens)
    outputs: list[list[int]] = [[] for _ in range(B)]
    finished = [False] * B

    def choose(logits: torch.Tensor) -> torch.Tensor:
        return sample_with(params, logits, gen)  # (B,)

    def keep(token: torch.Tensor) -> bool:
        """Record the new token of every unfinished sequence; False when the run should stop."""
        ended = torch.isin(token, eos).tolist() if not params.ignore_eos else [False] * B
        for b, t in enumerate(token.tolist()):
            if not finished[b]:
                outputs[b].append(t)
                finished[b] = ended[b]
        trace.output_ids = outputs[0]
        if all(finished):
            trace.stop_reason = "eos"
            return False
        if on_step is not None:
            add_latest_piece(lm, trace)
            if on_step(trace) is False:
                trace.stop_reason = "cancelled"
                return False
        return len(trace.output_ids) < max_new_tokens

    start = now(device)
    token = choose(prefill(lm, torch.tensor(prompts, device=device), cache))  # (B,)
    token.tolist()  # the first token exists on the host: TTFT ends here
    trace.prefill_seconds = now(device) - start
    if keep(token):
        step = None
        if cuda_graphs:
            from engine.techniques.cuda_graphs import GraphedDecoder

            capture_start = now(device)
            step = GraphedDecoder(lm, cache).step
            trace.warmup_seconds += now(device) - capture_start

        def after_step(token: torch.Tensor, seconds: float) -> bool:
            trace.steps.append(DecodeStep(seconds, cache.length, cache.nbytes_used, riders=B))
            return keep(token)

        decode_loop(lm, token, cache, max_new_tokens - 1, choose=choose, step=step, after_step=after_step)
    finish_trace(lm, trace, outputs, cache)
    if capture_attention:
        if on_capture is not None:
            on_capture(trace)
        replay_start = time.perf_counter()
        trace.attention = capture.capture_attention(lm, trace.prompt_ids, trace.output_ids, capture_layers)
        trace.capture_seconds = time.perf_counter() - replay_start
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
    seq = list(prompt_ids)
    for step in range(max_new_tokens):
        start = now(device)
        cache = new_cache(lm, 1, len(seq))  # thrown away after this step
        token = int(greedy(prefill(lm, torch.tensor([seq], device=device), cache)))
        seconds = now(device) - start
        if step == 0:
            trace.prefill_seconds = seconds
        else:
            trace.steps.append(DecodeStep(seconds, len(seq), 0))
        seq.append(token)
        trace.output_ids = seq[len(prompt_ids):]
        if token in lm.config.eos_token_ids:
            trace.stop_reason = "eos"
            break
        if on_step is not None and on_step(trace) is False:
            trace.stop_reason = "cancelled"
            break
    return finish_trace(lm, trace, [trace.output_ids])
