"""Speculative decoding by prompt lookup: guess several tokens by copying, check them all in ONE pass.

Drafts come from the text itself (Saxena 2023, "prompt lookup decoding"): find the most recent
earlier occurrence of the sequence's last n tokens (n = 3, then 2, then 1) and propose the k tokens
that followed it. Verification follows Leviathan et al. 2023 for greedy decoding: feed the last
token plus the k drafts as one small prefill over the KV cache, keep the longest prefix of drafts
that equals the model's own argmax, add the model's next token, and roll the cache back over the
rejected drafts. The output is token-for-token the greedy output; only the number of serial
forward passes (crossings of the bridge) changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.core.clock import now
from engine.core.generate import StepCallback, new_cache, prefill, warm_up
from engine.core.prompting import check_lengths, encode_prompt
from engine.core.recorder import finish_trace, start_trace
from engine.core.trace import DecodeStep, Trace


@dataclass
class VerifyPass:
    """One decode-phase forward pass: drafts checked, how many were right, tokens it produced."""
    seconds: float  # drafting + one forward pass over 1 + drafted tokens + acceptance
    drafted: int  # draft tokens proposed by prompt lookup (0 = a plain decode step)
    accepted: int  # drafts equal to the model's greedy choice
    emitted: int  # tokens this pass added to the output (accepted + 1, fewer at the end)
    kv_length: int  # tokens in the cache after rolling back the rejected drafts


@dataclass
class SpeculativeResult:
    trace: Trace  # steps: one DecodeStep per verification pass (not per token)
    passes: list[VerifyPass] = field(default_factory=list)

    @property
    def drafted(self) -> int:
        return sum(p.drafted for p in self.passes)

    @property
    def accepted(self) -> int:
        return sum(p.accepted for p in self.passes)

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / proposed drafts (NaN when nothing was ever drafted)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tokens_per_pass(self) -> float:
        """Decode-phase tokens per forward pass: 1.0 is plain greedy decoding."""
        emitted = sum(p.emitted for p in self.passes)
        return emitted / len(self.passes) if self.passes else float("nan")

    @property
    def tpot_s(self) -> float:
        """Seconds per output token after the first: (decode time) / (output tokens - 1)."""
        n = self.trace.n_output - 1
        return self.trace.decode_seconds / n if n > 0 else float("nan")


def find_draft(seq: list[int], k: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Up to k tokens that followed the most recent earlier match of seq's last n tokens (n from max_ngram down)."""
    if k <= 0:
        return []
    for n in range(max_ngram, min_ngram - 1, -1):
        if len(seq) <= n:
            continue
        tail = seq[-n:]
        for start in range(len(seq) - n - 1, -1, -1):  # most recent match first, the tail itself excluded
            if seq[start:start + n] == tail:
                return seq[start + n:start + n + k]
    return []


@torch.inference_mode()
def generate_speculative(lm, prompt: str | list[int], max_new_tokens: int, *, k: int = 4, max_ngram: int = 3,
                         chat: bool = False, ignore_eos: bool = False, on_step: StepCallback | None = None,
                         warmup: bool = True) -> SpeculativeResult:
    """Greedy generation with prompt-lookup drafts verified k+1 at a time; same tokens as `generate`."""
    prompt_ids = encode_prompt(lm, prompt, chat)
    T = len(prompt_ids)
    max_new_tokens = check_lengths(lm, T, max_new_tokens)
    device = lm.device
    warmup_seconds = warm_up(lm, 1) if warmup else 0.0
    capacity = min(T + max_new_tokens + k, lm.config.max_seq_len)  # drafts need room beyond the output
    cache = new_cache(lm, 1, capacity)
    eos = set(lm.config.eos_token_ids)
    trace = start_trace(lm, prompt_ids, dict(temperature=0.0, max_new_tokens=max_new_tokens, speculative="prompt lookup",
                                             draft_tokens=k, max_ngram=max_ngram, chat=chat), warmup_seconds=warmup_seconds)
    result = SpeculativeResult(trace)
    out: list[int] = []

    start = now(device)
    logits = prefill(lm, torch.tensor([prompt_ids], device=device), cache)  # (1, V)
    out.append(int(logits.argmax(-1)))
    trace.prefill_seconds = now(device) - start

    def done() -> bool:
        return len(out) >= max_new_tokens or (not ignore_eos and out[-1] in eos)

    while not done():
        trace.output_ids = out
        if on_step is not None and on_step(trace) is False:
            trace.stop_reason = "cancelled"
            break
        start = now(device)
        room = min(max_new_tokens - len(out), capacity - cache.length - 1)  # never draft past the end
        draft = find_draft(prompt_ids + out, max(0, min(k, room)), max_ngram)
        inputs = torch.tensor([[out[-1], *draft]], device=device)  # (1, 1 + d): last token + drafts
        before = cache.length
        logits = prefill(lm, inputs, cache, all_logits=True)  # (1, 1 + d, V): one pass checks every draft
        choices = logits[0].argmax(-1).tolist()  # choices[i]: greedy token after inputs[:i + 1]
        accepted = 0
        while accepted < len(draft) and draft[accepted] == choices[accepted]:
            accepted += 1
        new_tokens = draft[:accepted] + [choices[accepted]]
        cache.truncate(before + 1 + accepted)  # keep last token + accepted drafts; forget the rejected
        seconds = now(device) - start
        emitted = 0
        for token in new_tokens:
            out.append(token)
            emitted += 1
            if done():
                break
        result.passes.append(VerifyPass(seconds, len(draft), accepted, emitted, cache.length))
        trace.steps.append(DecodeStep(seconds, cache.length, cache.nbytes_used))

    if trace.stop_reason != "cancelled" and not ignore_eos and out[-1] in eos:
        trace.stop_reason = "eos"
    trace.prompt_text = prompt if isinstance(prompt, str) else lm.tokenizer.decode(prompt_ids)
    finish_trace(lm, trace, [out])
    return result
