"""The one place a Trace is started and finished: model facts, settings, readable token pieces, cache picture.

generate, generate_batch, generate_no_cache, speculative decoding and the scheduler all record
through these functions, so every trace carries the same fields filled the same way (live token pieces
while a run streams come from its Sequence, engine/core/sequence.py).
"""
from __future__ import annotations

from engine.core.capture import capture_attention
from engine.core.clock import now
from engine.core.prompting import token_pieces
from engine.core.trace import Trace, environment


def start_trace(lm, prompt_ids: list[int], settings: dict, batch_size: int = 1, warmup_seconds: float = 0.0) -> Trace:
    """An empty trace for `prompt_ids` with everything known before the first token."""
    trace = Trace(model=lm.name, device=str(lm.device), dtype=lm.dtype_name, prompt_ids=list(prompt_ids), output_ids=[],
                 text="", prefill_seconds=0.0, steps=[],
                 env=environment(lm.device) | {"kernels": lm.kernels, "kernels_measured": lm.kernel_why,
                                               "backends": lm.backends.record()},
                 batch_size=batch_size, warmup_seconds=warmup_seconds,
                 kv_bytes_per_token=lm.config.kv_bytes_per_token(lm.dtype.itemsize), weight_bytes=lm.weight_bytes,
                 n_params=lm.config.n_params, settings=dict(settings), config=lm.config.to_dict())
    trace.fallbacks_at_start = lm.backends.fallbacks()  # not a field: finish_trace compares
    return trace


def finish_trace(lm, trace: Trace, outputs: list[list[int]], cache=None, row: int = 0) -> Trace:
    """Fill the readable parts once timing is over: text, token pieces and (from `cache` row `row`) key norms."""
    tok = lm.tokenizer
    eager_steps = lm.backends.fallbacks() - getattr(trace, "fallbacks_at_start", lm.backends.fallbacks())
    if eager_steps > 0:  # the model's decode step could not serve some steps: say so beside its name
        trace.env["backends"]["eager_decode_steps"] = eager_steps
        trace.env["kernels"] += (f" (but {eager_steps} decode step{'s' if eager_steps > 1 else ''} of this run ran the "
                                 f"eager loop instead of the {lm.backends.decode_step.kind} step)")
    trace.output_ids = list(outputs[0])
    trace.batch_output_ids = [list(o) for o in outputs] if trace.batch_size > 1 else None
    trace.text = tok.decode(trace.output_ids, skip_special_tokens=True)
    trace.prompt_tokens = token_pieces(tok, trace.prompt_ids)
    trace.output_tokens = token_pieces(tok, trace.prompt_ids[-4:] + trace.output_ids)[min(4, trace.n_prompt):]
    if not trace.prompt_text:
        trace.prompt_text = tok.decode(trace.prompt_ids)
    if cache is not None:
        trace.kv_key_norms = cache.key_norms(row).half().cpu().numpy()  # (L, K, S)
        trace.kv_value_norms = cache.value_norms(row).half().cpu().numpy()
    return trace


def add_attention(lm, trace: Trace, layers=None) -> None:
    """The untimed attention capture of a finished run (`layers`, default all): fills attention and capture_seconds."""
    start = now(lm.device)
    trace.attention = capture_attention(lm, trace.prompt_ids, trace.output_ids, layers)
    trace.capture_seconds = now(lm.device) - start

