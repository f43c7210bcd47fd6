"""Words for the Remedies and Profile labs: which phase each remedy helps, and what the measurements say."""
from __future__ import annotations

import math

HELPS = {  # remedy key -> (phase it is meant to help, one-line idea)
    "kv_cache": ("decode", "Keep every past token's keys and values so each step computes one token, not the whole text."),
    "speculative": ("decode", "Guess several tokens by copying from the prompt, check them all in ONE forward pass."),
    "prefix": ("prefill", "Turn 2 reuses turn 1's KV cache: only the new tokens go through the valley."),
    "dtype": ("both", "Half the bytes per number (bfloat16): fewer bytes for the bridge, faster math only where the chip has it."),
    "int8": ("decode", "int8 weights: 4x fewer bytes per weight for the bridge to carry; the valley's arithmetic is unchanged."),
    "kernels": ("decode", "Same bytes, read better: library kernels that stream the weights in the layout this chip likes."),
    "overhead": ("decode", "Time between the math: Python, operator dispatch, kernel launches — paid once per step."),
}
TITLES = {
    "kv_cache": "KV cache on vs off", "speculative": "Speculative decoding (prompt lookup)", "prefix": "Prefix caching across chat turns",
    "dtype": "float32 vs bfloat16", "int8": "int8 weights",
    "kernels": "Prepacked weights / better kernels", "overhead": "The gap between steps", "matrix": "Indicator lights",
}
TAB_LABELS = {  # short, so the whole strip (Indicator lights included) fits a 1280-1400 px window
    "kv_cache": "KV cache", "speculative": "Speculative", "prefix": "Prefix cache", "dtype": "bfloat16",
    "int8": "int8", "kernels": "Kernels", "overhead": "Step gap", "matrix": "Indicator lights",
}
NOISE = 0.15  # a speed-up within ×1/1.15 … ×1.15 is treated as no effect: on a small shared machine repeated runs of
# the same request moved TTFT and TPOT by 10-25 % (Timing page; the 64 -> 32 runs: TTFT 183-240 ms)
NOISE_NOTE = (f"Differences within ±{NOISE:.0%} (×{1 / (1 + NOISE):.2f} … ×{1 + NOISE:.2f}) are treated as noise: "
              "repeated runs of one request move that much on a small or busy machine. Measure again to check.")
COPY_PROMPT = ("Summarise the following text in one sentence, reusing its words.\n\n"
               "The single-plank bridge lets riders cross one at a time: each rider waits for the one before to reach the "
               "far bank. The wide valley lets the whole convoy ride side by side, so a thousand horses pass in the time of one.")
OPEN_PROMPT = "Write a short poem about the sea."
TURN1, TURN2 = "What is a KV cache? Answer in two sentences.", "Why does it make decoding faster?"
LLAMA_CPP_CITATION = ("For scale (a citation, not measured here): llama.cpp running SmolLM2 at ~4.5 bits per weight (Q4) decodes "
                      "several times faster than float32 on the same CPU, while its prefill is no faster — the bridge cares about "
                      "bytes, the valley about FLOPs.")
CUDA_NOTE = ("Needs a CUDA GPU. On a GPU each decode step launches hundreds of small kernels; CUDA graphs "
             "(`torch.compile(mode='reduce-overhead')`) record them once and replay the whole step with one launch, removing "
             "most of the launch/dispatch gap measured above. Not available on this machine, so nothing is claimed here.")
LESSON = "Find which segment is stuck, then use that segment's strategy: money poured into the valley does nothing for the bridge."


def badge(key: str) -> str:
    """Streamlit badge markdown, coloured by phase: orange prefill, blue decode, grey both."""
    phase = HELPS[key][0]
    color = {"prefill": "orange", "decode": "blue"}.get(phase, "gray")
    return f":{color}-badge[helps: {phase}]"


def ms(seconds: float) -> str:
    return "—" if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)) else f"{seconds * 1e3:.1f} ms"


def ratio(baseline: float, remedy: float) -> float:
    """Speed-up: baseline time / remedy time (> 1 helps, < 1 hurts); NaN when not measurable."""
    if not baseline or not remedy or math.isnan(baseline) or math.isnan(remedy) or remedy <= 0:
        return float("nan")
    return baseline / remedy


def effect(x: float) -> str:
    """"faster", "slower", "noise" (within the NOISE band) or "n/a" for a measured speed-up."""
    if x is None or not math.isfinite(x) or x <= 0:
        return "n/a"
    if x > 1 + NOISE:
        return "faster"
    if x < 1 / (1 + NOISE):
        return "slower"
    return "noise"


def effect_words(x: float) -> str:
    """'×1.42 (faster)', '×0.83 (slower)', '×1.08 (within noise)'."""
    kind = effect(x)
    if kind == "n/a":
        return "n/a"
    return f"×{x:.2f} ({'within noise' if kind == 'noise' else kind})"


# the indicator lights say their verdict in shape and word as well as colour: readable without telling red from
# green (about 1 in 12 men cannot), on a washed-out projector, or printed in grey
MARKERS = {"faster": "▲ helps", "slower": "▼ hurts", "noise": "● noise"}
MARKER_KEY = "▲ helps  ▼ hurts  ● noise"  # the key, in chart titles


def effect_marker(x: float) -> str:
    """One indicator light's text: '▲ helps ×1.42', '▼ hurts ×0.83', '● noise ×1.08', or 'not measured'."""
    kind = effect(x)
    if kind == "n/a":
        return "not measured"
    return f"{MARKERS[kind]} ×{x:.2f}"


def kv_cache_summary(r) -> str:
    c, u = r.cached.steps, r.uncached.steps
    if not c or not u:
        return "Too few tokens to compare decode steps."
    return (f"With the cache, decode steps took {ms(sum(s.seconds for s in c) / len(c))} on average; without it, "
            f"{ms(sum(s.seconds for s in u) / len(u))} — and the last step ({ms(u[-1].seconds)}) cost more than the first "
            f"({ms(u[0].seconds)}) because it re-reads all {u[-1].kv_length} tokens. Same tokens: {'yes' if r.same_tokens else 'NO'}.")


def speculative_summary(rows) -> str:
    parts = [f"**{r.label}**: {r.acceptance_rate:.0%} of drafts accepted, {r.tokens_per_pass:.2f} tokens per forward pass, "
             f"TPOT {ms(r.greedy.tpot_s)} → {ms(r.speculative.tpot_s)} ({effect_words(r.speedup)}); identical to greedy: "
             f"{'yes' if r.identical else 'NO'}" for r in rows]
    return "  \n".join(parts)


def prefix_summary(r) -> str:
    return (f"Turn 2 has {r.turn2_tokens} tokens; {r.reused_tokens} came from turn 1's cache and only {r.computed_tokens} were "
            f"prefilled. TTFT {ms(r.full.ttft_s)} → {ms(r.reused.ttft_s)} "
            f"({effect_words(ratio(r.full.ttft_s, r.reused.ttft_s))}); decode per token {ms(r.full.tpot_s)} vs "
            f"{ms(r.reused.tpot_s)} ({effect_words(ratio(r.full.tpot_s, r.reused.tpot_s))}; nothing in decode changes "
            f"by design). Largest logit difference vs a full prefill: {r.max_logit_diff:.1e}.")


def phase_rows_summary(rows) -> str:
    base = rows[0]
    parts = [f"**{r.label}** vs {base.label}: TTFT {effect_words(ratio(base.ttft_s, r.ttft_s))}, "
             f"TPOT {effect_words(ratio(base.tpot_s, r.tpot_s))}" for r in rows[1:]]
    return "  \n".join(parts) + f"  \n(×>1 = faster, ×<1 = slower; best of the repeated runs; within ±{NOISE:.0%} = noise.)"


DTYPE_NOTE = ("bfloat16 halves the bytes per weight, which should help the bridge. But many CPUs have no native bfloat16 "
              "arithmetic: library kernels then convert on the fly and can get SLOWER, the valley most of all. The engine's "
              "own decode step (where measured faster here) widens each bfloat16 number as it reads it, so the bridge still "
              "reads half the bytes; and where the valley measured faster in float32, the fast kernels run prompts on a "
              "float32 copy of the weights (the kernels line says so), so bfloat16 costs the valley nothing. On GPUs "
              "with bf16 tensor cores (A100, H100, …) both phases speed up. What you see below is what this machine did.")


def _bridge_vs_valley(decode: float, prefill: float) -> str:
    """One sentence on what the measured speed-ups say about the two segments."""
    d, p = effect(decode), effect(prefill)
    if d == "faster" and p != "faster":
        return "The bridge gained and the valley did not: fewer or better-read bytes help the memory-bound segment."
    if d == "faster" and p == "faster":
        return "Both segments gained here."
    if d == "noise" and p == "noise":
        return "Neither segment changed beyond the noise band on this machine."
    if d == "slower" or p == "slower":
        hurt = " and ".join(n for n, k in (("decode", d), ("prefill", p)) if k == "slower")
        return (f"Measured slower for {hurt} here, beyond the noise band: on this machine and at these shapes the "
                "remedy cost more than it saved. Measure again; if it stays slower, this machine is a counter-example.")
    return "The valley gained, the bridge did not beyond the noise band."


def int8_summary(r) -> str:
    f, q = r.rows
    a = r.agreement
    decode, prefill = ratio(f.tpot_s, q.tpot_s), ratio(f.ttft_s, q.ttft_s)
    lines = [f"Matrix bytes read per decode step: {f.matrix_bytes / 1e6:.1f} MB → {q.matrix_bytes / 1e6:.1f} MB "
             f"(÷{f.matrix_bytes / max(q.matrix_bytes, 1):.1f}). Kernel: {r.kernel}. Output check on {a.positions} positions: "
             f"top-1 agreement {a.top1_agreement:.0%}, largest logit difference {a.max_abs_logit_diff:.3f}, relative error "
             f"{a.rel_error:.3f}. Decode TPOT {effect_words(decode)}, prefill TTFT {effect_words(prefill)}.",
             _bridge_vs_valley(decode, prefill)]
    if effect(decode) == "faster":
        lines.append("Decode gains less than the byte ratio because the per-step overhead stays.")
    if effect(prefill) == "slower":
        lines.append("Prefill does the same arithmetic and here also pays for turning int8 back into float before "
                     "each wide matmul.")
    return " ".join(lines)


def kernels_summary(r) -> str:
    plain, fast = r.rows
    decode, prefill = ratio(plain.tpot_s, fast.tpot_s), ratio(plain.ttft_s, fast.ttft_s)
    lines = [f"Fast path here: **{r.fast_label}**. Both read the same {plain.matrix_bytes / 1e6:.0f} MB of weight "
             f"matrices per decode step; only the way they are read differs. Decode TPOT {effect_words(decode)}, "
             f"prefill TTFT {effect_words(prefill)}. Same greedy tokens: {'yes' if r.same_tokens else 'NO'}.",
             _bridge_vs_valley(decode, prefill)]
    if effect(decode) == "faster":
        lines.append("A GEMV reads each weight once for one multiply-add, so a kernel that streams the matrix in the "
                     "order the cache lines and vector units want brings the bridge closer to the memory's own speed.")
    return " ".join(lines)


def overhead_summary(r) -> str:
    return (f"Real decode step: {ms(r.real_step_s)}. Same-depth skeleton (math ≈ 0): {ms(r.skeleton_step_s)}. So about "
            f"{r.overhead_share:.0%} of each step is overhead that no bandwidth or FLOP budget buys back. Method: {r.method}")


PROFILE_INTRO = ("torch.profiler records every operator of one prefill and of a few decode steps. Prefill's matrix "
                 "products have many rows (one per prompt token): GEMM, the wide valley. Decode's have one row: GEMV, "
                 "the single-plank bridge, where each weight is read for one multiply-add.")


def profile_summary(result) -> str:
    p, d = result.prefill, result.decode
    gemm = p.by_kind.get("GEMM (matrix × matrix)", 0.0) / p.wall_ms if p.wall_ms else 0.0
    gemv = d.by_kind.get("GEMV (matrix × vector)", 0.0) / d.wall_ms if d.wall_ms else 0.0
    return (f"Prefill of {result.n_prompt} tokens: {p.wall_ms:.1f} ms, {gemm:.0%} in GEMM. One decode step: {d.wall_ms:.1f} ms, "
            f"{gemv:.0%} in GEMV. {result.note}")
