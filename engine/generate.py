"""Prefill once, then decode one token per step: the two phases, timed separately, into a Trace.

`prefill` pushes every prompt token through the model in ONE forward pass (wide, parallel,
compute-bound). `decode_step` pushes exactly one new token per sequence (narrow, serial, reads all
weights and the whole KV cache each time: memory-bound). Timestamps follow vLLM's metric meanings
and, on CUDA, are taken after `torch.cuda.synchronize()`.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import torch

from engine.errors import EngineError
from engine.kv_cache import KVCache
from engine.prompting import check_lengths, encode_prompt, token_pieces
from engine.sampling import make_generator, sample
from engine.trace import AttentionCapture, DecodeStep, Trace, environment

StepCallback = Callable[[Trace], bool | None]  # return False to stop early (e.g. a Cancel button)


def now(device: torch.device) -> float:
    """A timestamp taken only once the device has finished all queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    return time.perf_counter()


@torch.inference_mode()
def prefill(lm, input_ids: torch.Tensor, cache: KVCache, *, all_logits: bool = False) -> torch.Tensor:
    """All T prompt tokens (B, T) in one forward pass; logits (B, V), or (B, T, V) with all_logits."""
    return lm.model(input_ids, cache, all_logits=all_logits)[0]


@torch.inference_mode()
def decode_step(lm, token_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Exactly one new token per sequence, (B,) or (B, 1) -> logits (B, V)."""
    token_ids = token_ids.reshape(-1, 1)  # (B, 1)
    return lm.model(token_ids, cache)[0]


def new_cache(lm, batch: int, max_len: int) -> KVCache:
    return KVCache(lm.config, batch, max_len, lm.dtype, lm.device)


def warm_up(lm, batch: int) -> float:
    """Run a tiny prefill and two decode steps once per batch size; return the seconds it took."""
    if batch in lm.warm:
        return 0.0
    start = now(lm.device)
    cache = new_cache(lm, batch, 16)
    ids = torch.zeros(batch, 8, dtype=torch.long, device=lm.device)
    prefill(lm, ids, cache)
    for _ in range(2):
        decode_step(lm, ids[:, 0], cache)
    lm.warm.add(batch)
    return now(lm.device) - start


def generate(lm, prompt: str | list[int], max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int = 0, top_p: float = 1.0, seed: int | None = None, ignore_eos: bool = False,
             chat: bool = False, capture_attention: bool = False, capture_layers=None,
             batch_size: int = 1, on_step: StepCallback | None = None, warmup: bool = True,
             cuda_graphs: bool = False) -> Trace:
    """Generate for one prompt (text or ids), replicated `batch_size` times; see `generate_batch`."""
    ids = encode_prompt(lm, prompt, chat)
    trace = generate_batch(lm, [ids] * batch_size, max_new_tokens, temperature=temperature, top_k=top_k,
                           top_p=top_p, seed=seed, ignore_eos=ignore_eos, capture_attention=capture_attention,
                           capture_layers=capture_layers, on_step=on_step, warmup=warmup,
                           cuda_graphs=cuda_graphs)
    trace.prompt_text = prompt if isinstance(prompt, str) else lm.tokenizer.decode(ids)
    trace.settings["chat"] = chat
    return trace


def generate_batch(lm, prompts: list[list[int]], max_new_tokens: int, *, temperature: float = 0.0,
                   top_k: int = 0, top_p: float = 1.0, seed: int | None = None, ignore_eos: bool = False,
                   capture_attention: bool = False, capture_layers=None,
                   on_step: StepCallback | None = None, warmup: bool = True, cuda_graphs: bool = False) -> Trace:
    """B prompts of equal token length: one batched prefill, then batched decode steps.

    cuda_graphs=True (CUDA only) replays each decode step from a captured CUDA graph; the capture
    happens after the first token and is counted as warm-up, not as a decode step.
    """
    if cuda_graphs and lm.device.type != "cuda":
        raise EngineError("CUDA graphs need a CUDA GPU; this model runs on " + lm.device.type)
    prompts = [encode_prompt(lm, p) for p in prompts]
    if len({len(p) for p in prompts}) != 1:
        raise EngineError("all prompts of a batch must have the same number of tokens (no padding here)")
    B, T = len(prompts), len(prompts[0])
    max_new_tokens = check_lengths(lm, T, max_new_tokens)
    device = lm.device
    warmup_seconds = warm_up(lm, B) if warmup else 0.0
    gen = make_generator(seed, device)
    eos = torch.tensor(lm.config.eos_token_ids or [-1], device=device)
    input_ids = torch.tensor(prompts, device=device)  # (B, T)
    cache = new_cache(lm, B, T + max_new_tokens)
    trace = Trace(model=lm.name, device=str(device), dtype=lm.dtype_name, prompt_ids=prompts[0], output_ids=[],
                  text="", prefill_seconds=0.0, steps=[], env=environment(device), batch_size=B,
                  kv_bytes_per_token=lm.config.kv_bytes_per_token(cache.keys[0].element_size()),
                  weight_bytes=lm.weight_bytes, n_params=lm.config.n_params, warmup_seconds=warmup_seconds,
                  settings=dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                ignore_eos=ignore_eos, max_new_tokens=max_new_tokens,
                                capture_attention=capture_attention))
    outputs: list[list[int]] = [[] for _ in range(B)]
    finished = torch.zeros(B, dtype=torch.bool, device=device)

    start = now(device)
    logits = prefill(lm, input_ids, cache)  # (B, V)
    token = sample(logits, gen, temperature, top_k, top_p)  # (B,)
    token_list = token.tolist()  # the first token exists on the host: TTFT ends here
    trace.prefill_seconds = now(device) - start
    trace.settings["cuda_graphs"] = cuda_graphs
    decoder = None
    if cuda_graphs and max_new_tokens > 1:
        from engine.static_decode import GraphedDecoder

        capture_start = now(device)
        decoder = GraphedDecoder(lm, cache)
        trace.warmup_seconds += now(device) - capture_start

    for step in range(max_new_tokens):
        for b, t in enumerate(token_list):
            outputs[b].append(t)
        trace.output_ids = outputs[0]
        if not ignore_eos:
            finished |= torch.isin(token, eos)
            if bool(finished.all()):
                trace.stop_reason = "eos"
                break
        if on_step is not None:
            trace.output_tokens.append(token_pieces(lm.tokenizer, outputs[0][-5:])[-1])
            if on_step(trace) is False:
                trace.stop_reason = "cancelled"
                break
        if step == max_new_tokens - 1:
            break
        start = now(device)
        logits = decoder.step(token) if decoder else decode_step(lm, token, cache)  # (B, V)
        token = sample(logits, gen, temperature, top_k, top_p)  # (B,)
        token_list = token.tolist()
        trace.steps.append(DecodeStep(now(device) - start, cache.length, cache.nbytes_used))

    finish_trace(lm, trace, outputs, cache)
    if capture_attention:
        replay_start = time.perf_counter()
        trace.attention = capture_replay(lm, trace.prompt_ids, trace.output_ids, capture_layers)
        trace.capture_seconds = time.perf_counter() - replay_start
    return trace


def finish_trace(lm, trace: Trace, outputs: list[list[int]], cache: KVCache) -> None:
    """Fill the readable parts of a trace once timing is over."""
    tok = lm.tokenizer
    trace.output_ids = outputs[0]
    trace.batch_output_ids = outputs if trace.batch_size > 1 else None
    trace.text = tok.decode(outputs[0], skip_special_tokens=True)
    trace.prompt_tokens = token_pieces(tok, trace.prompt_ids)
    trace.output_tokens = token_pieces(tok, trace.prompt_ids[-4:] + outputs[0])[min(4, trace.n_prompt):]
    if not trace.prompt_text:
        trace.prompt_text = tok.decode(trace.prompt_ids)
    trace.kv_key_norms = cache.key_norms()[:, 0].half().cpu().numpy()  # (L, K, S)
    trace.kv_value_norms = cache.value_norms()[:, 0].half().cpu().numpy()


@torch.inference_mode()
def capture_replay(lm, prompt_ids: list[int], output_ids: list[int], layers=None) -> AttentionCapture:
    """Re-run prefill and each decode step with the explicit softmax path and keep the probabilities.

    Kept out of the timed run so timings measure the fast path; its own cost is `capture_seconds`.
    """
    layers = tuple(range(lm.config.n_layers)) if layers is None else tuple(layers)
    cache = new_cache(lm, 1, len(prompt_ids) + len(output_ids))
    capture = AttentionCapture(layers=list(layers))
    ids = torch.tensor([prompt_ids], device=lm.device)  # (1, T)
    _, probs = lm.model(ids, cache, capture_layers=layers)
    capture.prefill = [probs[l][0].half().cpu().numpy() for l in layers]  # (H, T, T) each
    for t in output_ids[:-1]:  # the last output token is never fed back
        _, probs = lm.model(torch.tensor([[t]], device=lm.device), cache, capture_layers=layers)
        capture.decode.append([probs[l][0, :, 0].half().cpu().numpy() for l in layers])  # (H, S) each
    return capture


@torch.inference_mode()
def generate_no_cache(lm, prompt_ids: list[int], max_new_tokens: int,
                      on_step: StepCallback | None = None) -> Trace:
    """Reference path without a KV cache: every step re-runs the WHOLE sequence (greedy).

    Same tokens as `generate`, but step t costs a prefill of T+t tokens: the cache is what makes
    decode cheap per token.
    """
    max_new_tokens = check_lengths(lm, len(prompt_ids), max_new_tokens)
    device = lm.device
    trace = Trace(model=lm.name, device=str(device), dtype=lm.dtype_name, prompt_ids=list(prompt_ids),
                  output_ids=[], text="", prefill_seconds=0.0, steps=[], env=environment(device),
                  settings=dict(temperature=0.0, kv_cache=False, max_new_tokens=max_new_tokens))
    seq = list(prompt_ids)
    for step in range(max_new_tokens):
        start = now(device)
        cache = new_cache(lm, 1, len(seq))  # thrown away after this step
        token = int(prefill(lm, torch.tensor([seq], device=device), cache).argmax(-1))
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
    trace.text = lm.tokenizer.decode(trace.output_ids, skip_special_tokens=True)
    return trace
