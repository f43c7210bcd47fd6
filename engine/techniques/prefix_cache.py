"""Prefix caching across chat turns: keep turn 1's KV cache and prefill only what turn 2 adds.

Turn 2's prompt is turn 1's prompt + turn 1's answer + the new user message (chat template), so
most of its tokens were already pushed through the model once. Their keys and values are still in
the cache: keep the longest common token prefix, `truncate` the rest, and prefill only the new
tokens on top (a prefill with an offset causal mask). TTFT drops; decode is unchanged. Real servers
do this across requests too (vLLM's automatic prefix caching, SGLang's RadixAttention).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.core.clock import now
from engine.core.generate import decode_loop, new_cache, prefill
from engine.core.kv_cache import KVCache
from engine.core.prompting import chat_ids, check_lengths


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class PrefillOutcome:
    logits: torch.Tensor  # (1, V) next-token logits, or (1, T_new, V) with all_logits
    seconds: float  # time of the prefill pass itself (reuse bookkeeping included)
    reused_tokens: int  # prompt tokens whose keys/values came from the cache
    computed_tokens: int  # prompt tokens pushed through the model this time


class PrefixCache:
    """One conversation's KV cache plus the token ids it currently holds."""

    def __init__(self, lm, max_len: int):
        self.lm = lm
        self.cache: KVCache = new_cache(lm, 1, max_len)
        self.ids: list[int] = []  # tokens whose keys/values sit in cache[:length]

    @torch.inference_mode()
    def prefill(self, prompt_ids: list[int], *, reuse: bool = True, all_logits: bool = False) -> PrefillOutcome:
        """Prefill `prompt_ids`, reusing the cached common prefix (at least one token is always computed)."""
        lm = self.lm
        check_lengths(lm, len(prompt_ids), 1)
        start = now(lm.device)
        keep = min(common_prefix_len(self.ids, prompt_ids), len(prompt_ids) - 1) if reuse else 0
        if len(prompt_ids) > self.cache.max_len:  # grow: a bigger cache, the shared prefix copied over
            bigger = new_cache(lm, 1, max(len(prompt_ids) + 64, 2 * self.cache.max_len))
            bigger.copy_prefix_from(self.cache, keep)
            self.cache = bigger
        else:
            self.cache.truncate(keep)
        new = torch.tensor([prompt_ids[keep:]], device=lm.device)  # (1, T_new)
        logits = prefill(lm, new, self.cache, all_logits=all_logits)
        seconds = now(lm.device) - start
        self.ids = list(prompt_ids)
        return PrefillOutcome(logits, seconds, keep, len(prompt_ids) - keep)

    @torch.inference_mode()
    def greedy_answer(self, first_logits: torch.Tensor, max_new_tokens: int) -> tuple[list[int], list[float]]:
        """Greedy decode after a prefill; returns the answer ids and each decode step's seconds."""
        lm = self.lm
        eos = set(lm.config.eos_token_ids)
        room = min(max_new_tokens, self.cache.max_len - self.cache.length + 1, lm.config.max_seq_len - self.cache.length)
        answer = [int(first_logits.reshape(-1, first_logits.shape[-1])[-1].argmax())]

        def keep(token: torch.Tensor, seconds: float) -> bool:
            answer.append(int(token))
            return answer[-1] not in eos

        step_seconds = []
        if answer[-1] not in eos and room > 1:
            step_seconds = decode_loop(lm, torch.tensor([answer[-1]], device=lm.device), self.cache, room - 1,
                                       after_step=keep)
        self.ids = self.ids + answer[:-1]  # the last token was never fed back: it is not in the cache
        return answer, step_seconds


@dataclass
class TwoTurnResult:
    turn1_ids: list[int]
    answer_ids: list[int]
    turn2_ids: list[int]
    full: PrefillOutcome  # turn 2 prefilled from scratch
    reused: PrefillOutcome  # turn 2 prefilled on top of turn 1's cache
    max_logit_diff: float  # |full - reused| over the next-token logits
    decode_full_s: list[float]  # a few decode steps after each prefill: the cache reuse must not change them
    decode_reused_s: list[float]


def two_turn_chat(lm, user1: str, user2: str, answer_tokens: int = 24, decode_tokens: int = 8,
                  system: str | None = None) -> TwoTurnResult:
    """Turn 1 (prefill + greedy answer), then turn 2 prefilled twice: from scratch and reusing turn 1's cache."""
    history = [{"role": "system", "content": system}] if system else []
    turn1 = chat_ids(lm, history + [{"role": "user", "content": user1}])
    conv = PrefixCache(lm, len(turn1) + answer_tokens + 256)
    first = conv.prefill(turn1)
    answer, _ = conv.greedy_answer(first.logits, answer_tokens)
    answer_text = lm.tokenizer.decode(answer, skip_special_tokens=True)
    messages = history + [{"role": "user", "content": user1}, {"role": "assistant", "content": answer_text},
                          {"role": "user", "content": user2}]
    turn2 = chat_ids(lm, messages)
    scratch = PrefixCache(lm, len(turn2) + decode_tokens + 1)
    full = scratch.prefill(turn2, reuse=False)
    _, decode_full = scratch.greedy_answer(full.logits, decode_tokens)
    reused = conv.prefill(turn2)
    _, decode_reused = conv.greedy_answer(reused.logits, decode_tokens)
    diff = float((full.logits - reused.logits).abs().max())
    return TwoTurnResult(turn1, answer, turn2, full, reused, diff, decode_full, decode_reused)
