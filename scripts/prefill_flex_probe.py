"""Probe: whole-model prefill time with SDPA vs compiled flex_attention in the causal prefill path, side by side.

Measurement only (engine code is not changed): engine.core.model's attention_fast is swapped for a wrapper that
sends plain causal prefill (T == S, no mask) to torch.compile(flex_attention, dynamic=True) with a causal block
mask, everything else to SDPA. The two variants take turns each round; best of N. Run under flock /tmp/tb/bench.lock:
    .venv/bin/python scripts/prefill_flex_probe.py [--tokens 128 512 1024] [--rounds 6]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine.core.model as model_mod  # noqa: E402
from engine.core.generate import new_cache, prefill  # noqa: E402
from engine.core.layers import attention_fast  # noqa: E402
from engine.labs.sweeps import prompt_ids_of_length  # noqa: E402
from engine.loading.loader import load_model, set_threads  # noqa: E402


def flex_prefill_attention():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention, dynamic=True)
    masks: dict[int, object] = {}

    def attn(q, k, v, mask=None):
        T, S = q.shape[2], k.shape[2]
        if mask is not None or T != S or T == 1:
            return attention_fast(q, k, v, mask)
        if T not in masks:
            masks[T] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, T, T, device="cpu")
        return compiled(q, k, v, block_mask=masks[T], enable_gqa=q.shape[1] != k.shape[1])
    return attn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, nargs="+", default=[128, 512, 1024])
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    set_threads(2)
    lm = load_model(device="cpu")  # the default model (SmolLM2-135M)
    flex = flex_prefill_attention()
    for n in args.tokens:
        ids = torch.tensor([prompt_ids_of_length(lm, n)])  # (1, T)
        best = {"sdpa": float("inf"), "flex": float("inf")}
        outs = {}
        for r in range(args.rounds + 1):  # round 0 warms up (and compiles)
            for name in (("sdpa", "flex") if r % 2 else ("flex", "sdpa")):
                model_mod.attention_fast = flex if name == "flex" else attention_fast
                cache = new_cache(lm, 1, n + 1)
                t0 = time.perf_counter()
                with torch.no_grad():
                    outs[name] = prefill(lm, ids, cache)
                dt = time.perf_counter() - t0
                if r:
                    best[name] = min(best[name], dt)
                else:
                    print(f"# {n} tokens, {name} first call {dt:.2f} s")
        model_mod.attention_fast = attention_fast
        a, b = outs["sdpa"][:, -1].float(), outs["flex"][:, -1].float()  # last position's logits
        err = ((a - b).abs().max() / a.abs().max()).item()
        print(f"{n:5d} tokens: sdpa {1e3 * best['sdpa']:7.1f} ms, flex {1e3 * best['flex']:7.1f} ms, "
              f"sdpa/flex {best['sdpa'] / best['flex']:.3f}, same argmax {bool(a.argmax() == b.argmax())}, "
              f"max rel logit diff {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
