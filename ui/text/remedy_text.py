"""Words for the Remedies and Profile labs: which phase each remedy helps, and what the measurements say.

A verdict (helps, hurts, too close to tell) comes from every run this session made of a remedy (each measurement runs
the baseline and the remedy several times, interleaved): the runs' speed-ups against their own spread
(engine/labs/repeats.py), never a fixed noise band. Fewer than three runs get no verdict.
"""
from __future__ import annotations

import math

from engine.labs import repeats
from engine.labs.repeats import MIN_REPEATS, Repeated, add_waits
from ui.text.lab_text import busy_banner, cpu_wait_words

HELPS = {  # remedy key -> (phase it is meant to help, one-line idea)
    "kv_cache": ("decode", "Keep every past token's keys and values so each step computes one token, not the whole text."),
    "speculative": ("decode", "Guess several tokens by copying from the prompt, check them all in ONE forward pass: "
                              "it pays while a step is memory-bound and the guesses are accepted."),
    "prefix": ("prefill", "Turn 2 reuses turn 1's KV cache: only the new tokens go through the valley."),
    "dtype": ("both", "Half the bytes per number (bfloat16): fewer bytes for the bridge, faster math only where the chip has it."),
    "int8": ("decode", "int8 weights: 4x fewer bytes per weight than float32 (2x fewer than bf16) for the bridge to carry. "
                       "Weight-only int8, as here, leaves the valley's arithmetic unchanged; int8 or fp8 activations too "
                       "(W8A8, FP8) also speed up prefill on cards with such tensor cores."),
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
HISTORY_KEEP = 5  # measurements of each remedy kept for its verdict (the latest ones)
NOISE_NOTE = ("Verdicts come from every run this session made of each remedy, here on this machine (each Measure runs "
              "the baseline and the remedy in turn, three times; the KV cache's Measure once, so it needs three "
              "Measures): **▲ helps** or **▼ hurts** only when every run moved "
              "the same way, each by more than the spread between the runs; **● too close to tell** otherwise (the "
              f"machine moved more than the remedy); **○ too few runs** with fewer than {MIN_REPEATS} (press Measure "
              "again).")
COPY_PROMPT = ("Summarise the following text in one sentence, reusing its words.\n\n"
               "The single-plank bridge lets riders cross one at a time: each rider waits for the one before to reach the "
               "far bank. The wide valley lets the whole convoy ride side by side, so a thousand horses pass in the time of one.")
OPEN_PROMPT = "Write a short poem about the sea."
TURN1, TURN2 = "What is a KV cache? Answer in two sentences.", "Why does it make decoding faster?"
LLAMA_CPP_CITATION = ("A published measurement, not made here: in llama.cpp's Apple-silicon benchmark "
                      "(github.com/ggml-org/llama.cpp/discussions/4167; Llama-2 7B on an M2 Ultra's 76-core GPU, one "
                      "2023 build), 4-bit Q4_0 weights against F16 generated tokens ×2.3 faster (41.0 → 94.3 tokens/s) "
                      "while prompt processing got no faster (1,402 → 1,238 tokens/s): the bridge cares about bytes, "
                      "the valley about arithmetic.")
CUDA_NOTE = ("Needs a CUDA GPU. On a GPU each decode step launches hundreds of small kernels; CUDA graphs "
             "(`torch.compile(mode='reduce-overhead')`) record them once and replay the whole step with one launch, removing "
             "most of a GPU's launch and dispatch gap (the kind of gap measured above on this machine, where CUDA "
             "graphs do not exist). Not available on this machine, so nothing is measured here.")
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


# the indicator lights say their verdict in shape and word as well as colour: readable without telling red from
# green (about 1 in 12 men cannot), on a washed-out projector, or printed in grey
MARKERS = {repeats.FASTER: "▲ helps", repeats.SLOWER: "▼ hurts", repeats.NOISE: "● too close to tell",
           repeats.FEW: "○ too few runs"}
MARKER_KEY = "▲ helps  ▼ hurts  ● too close to tell  ○ too few runs"  # the key, in chart titles


class Effect(repeats.Effect):
    """One remedy's speed-up on one phase over this session's runs of it (baseline time ÷ remedy time), in words."""

    def words(self) -> str:
        """'×1.42 (faster; median of 3, 6% apart)', '×1.42 (1 run: a verdict needs 3)', …"""
        kind, n = self.verdict, len(self.measured)
        if kind == repeats.NONE:
            return "n/a"
        if kind == repeats.FEW:
            return f"×{self.median:.2f} ({n} run{'s' if n != 1 else ''}: a verdict needs {MIN_REPEATS})"
        what = {repeats.FASTER: "faster", repeats.SLOWER: "slower", repeats.NOISE: "too close to tell"}[kind]
        return f"×{self.median:.2f} ({what}; median of {n}, {self.spread:.0%} apart)"

    def marker(self) -> str:
        """One indicator light's text: '▲ helps ×1.42', '○ too few runs ×1.42', '● too close to tell ×1.08', …"""
        kind = self.verdict
        return "not measured" if kind == repeats.NONE else f"{MARKERS[kind]} ×{self.median:.2f}"


def _paired(base: list[float], alt: list[float], base_median: float, alt_median: float) -> list[float]:
    """Per-run speed-ups base / alt where both rows kept their runs (run i against run i), else the medians'."""
    if base and alt:
        return [ratio(b, a) for b, a in zip(base, alt)]
    return [ratio(base_median, alt_median)]


def speedups(key: str, result) -> tuple[list[float], list[float]]:
    """(TTFT, TPOT) speed-ups of one measurement of remedy `key`, one per run (NaN where it compares nothing)."""
    nan = [float("nan")]
    if key == "kv_cache":
        if not result.cached.steps or not result.uncached.steps:
            return nan, nan
        mean = lambda t: sum(s.seconds for s in t.steps) / len(t.steps)  # noqa: E731
        # the first pass is the same full prefill with or without a cache: nothing to compare there
        return nan, [ratio(mean(result.uncached), mean(result.cached))]
    if key == "speculative":
        g, p = result[0].greedy, result[0].speculative
    elif key == "prefix":
        g, p = result.full, result.reused
    else:
        rows = getattr(result, "rows", result)  # dtype: a list of rows; int8 and kernels: a result holding them
        if not rows or len(rows) < 2:
            return nan, nan
        g, p = rows[0], rows[1]
    return (_paired(g.ttft_runs, p.ttft_runs, g.ttft_s, p.ttft_s), _paired(g.tpot_runs, p.tpot_runs, g.tpot_s, p.tpot_s))


def effects(key: str, history) -> tuple[Effect, Effect]:
    """The (TTFT, TPOT) Effects of remedy `key` over `history`: its measurements this session, oldest first (a single
    result is taken as one measurement), every run of each."""
    runs = history if isinstance(history, list) else [history]
    pairs = [speedups(key, r) for r in runs[-HISTORY_KEEP:]]
    return Effect(tuple(x for p in pairs for x in p[0])), Effect(tuple(x for p in pairs for x in p[1]))


def rows_notes(rows) -> str:
    """The runs' decode paths (where they differ) and CPU wait, in words, with the busy-machine banner first."""
    rows = [r for r in rows if r is not None]
    wait = add_waits(r.cpu_wait for r in rows if getattr(r, "cpu_wait", None) is not None)
    parts = [busy_banner(wait) or ""]
    paths = {r.label: r.path for r in rows if getattr(r, "path", "")}
    if len(set(paths.values())) > 1:
        parts.append("Decode paths: " + "; ".join(f"{label} ran the {path}" for label, path in paths.items())
                     + ". Two programs, not only two settings: the comparison includes the difference of paths.")
    parts.append(cpu_wait_words(wait))
    return " ".join(p for p in parts if p)


def spread_words(row) -> str:
    """'TTFT 80.1 ms (3 runs, 4% apart)' for one row's median and its runs."""
    t, d = Repeated.of(row.ttft_runs), Repeated.of(row.tpot_runs)
    apart = lambda r: f", {r.n} runs {r.spread:.0%} apart" if r.n >= 2 else ""  # noqa: E731
    return f"TTFT {ms(row.ttft_s)}{apart(t)}, TPOT {ms(row.tpot_s)}{apart(d)}"


def keep(history: dict, key: str, result) -> list:
    """Add a new measurement of `key` to the session's `history` (key -> list), keeping the latest HISTORY_KEEP."""
    runs = history.setdefault(key, [])
    runs.append(result)
    del runs[:-HISTORY_KEEP]
    return runs


def kv_cache_summary(r, history=None) -> str:
    """`history`: this session's measurements of the remedy (r the latest); the verdict comes from all of them."""
    c, u = r.cached.steps, r.uncached.steps
    if not c or not u:
        return "Too few tokens to compare decode steps."
    _, tpot = effects("kv_cache", history or [r])
    first, last = u[0], u[-1]
    if last.kv_length > first.kv_length and last.seconds > first.seconds:
        grew = (f", so the last step ({ms(last.seconds)}, over {last.kv_length} tokens) cost more than the first "
                f"({ms(first.seconds)}, over {first.kv_length})")
    else:  # one run: a busy moment can make a later step no dearer than the first
        grew = (f"; here the last step ({ms(last.seconds)}, over {last.kv_length} tokens) was no dearer than the first "
                f"({ms(first.seconds)}): one run, so noise can hide the growth")
    return (f"With the cache, decode steps took {ms(sum(s.seconds for s in c) / len(c))} on average; without it, "
            f"{ms(sum(s.seconds for s in u) / len(u))} (each crossing {tpot.words()}). Without a cache every step "
            f"recomputes the keys and values of all the tokens so far: it becomes a prefill of the whole text{grew}. "
            f"Same tokens: {'yes' if r.same_tokens else 'NO'}.")


def speculative_summary(rows, history=None) -> str:
    _, tpot = effects("speculative", history or [rows])
    parts = [f"**{r.label}**: {r.acceptance_rate:.0%} of drafts accepted, {r.tokens_per_pass:.2f} tokens per forward pass, "
             f"TPOT {ms(r.greedy.tpot_s)} → {ms(r.speculative.tpot_s)}; identical to greedy: "
             f"{'yes' if r.identical else 'NO'}" for r in rows]
    parts.append(f"TPOT on the first prompt over this session's measurements: {tpot.words()}.")
    return "  \n".join(parts)


def prefix_summary(r, history=None) -> str:
    ttft, tpot = effects("prefix", history or [r])
    return (f"Turn 2 has {r.turn2_tokens} tokens; {r.reused_tokens} came from turn 1's cache and only {r.computed_tokens} were "
            f"prefilled. TTFT {ms(r.full.ttft_s)} → {ms(r.reused.ttft_s)} ({ttft.words()}); decode per token "
            f"{ms(r.full.tpot_s)} vs {ms(r.reused.tpot_s)} ({tpot.words()}; nothing in decode changes by design). "
            f"Largest logit difference vs a full prefill: {r.max_logit_diff:.1e}.")


def phase_rows_summary(rows, history=None, key: str = "dtype") -> str:
    """The second row against the first (`history`: this session's measurements of remedy `key`, rows the latest)."""
    base, alt = rows[0], rows[1]
    ttft, tpot = effects(key, history or [rows])
    return (f"**{alt.label}** vs {base.label}: TTFT {ttft.words()}, TPOT {tpot.words()}  \n"
            "(×>1 = faster, ×<1 = slower; each bar is the median of its runs.) " + rows_notes(rows))


DTYPE_NOTE = ("bfloat16 halves the bytes per weight, which should help the bridge. But many CPUs have no native bfloat16 "
              "arithmetic: library kernels then convert on the fly and can get SLOWER, the valley most of all. The engine's "
              "own decode step (where measured faster here) widens each bfloat16 number as it reads it, so the bridge still "
              "reads half the bytes; and where the valley measured faster in float32, the fast kernels run prompts on a "
              "float32 copy of the weights (the kernels line says so), so bfloat16 costs the valley nothing. On GPUs "
              "with bf16 tensor cores (A100, H100, …) both phases speed up for a model large enough that bytes and arithmetic, "
              "not kernel launches, set the pace; a model this small may show little. What you see below is what this "
              "machine did.")


def _bridge_vs_valley(decode: Effect, prefill: Effect) -> str:
    """One sentence on what the measured speed-ups say about the two segments."""
    d, p = decode.verdict, prefill.verdict
    if repeats.FEW in (d, p):
        return (f"Fewer than {MIN_REPEATS} runs give no verdict: press Measure again to see how much these numbers "
                "move.")
    if d == "faster" and p != "faster":
        return "The bridge gained and the valley did not: fewer or better-read bytes help the memory-bound segment."
    if d == "faster" and p == "faster":
        return "Both segments gained here."
    if d == "slower" or p == "slower":
        hurt = " and ".join(n for n, k in (("decode", d), ("prefill", p)) if k == "slower")
        return (f"Measured slower for {hurt} here, in every measurement and by more than their spread: on this machine "
                "and at these shapes the remedy cost more than it saved.")
    if d == "noise" and p == "noise":
        return "Neither segment changed by more than the measurements' own spread on this machine."
    return "The valley gained; the bridge did not by more than the measurements' spread."


def int8_summary(r, history=None) -> str:
    f, q = r.rows
    a = r.agreement
    prefill, decode = effects("int8", history or [r])
    lines = [f"Matrix bytes read per decode step: {f.matrix_bytes / 1e6:.1f} MB → {q.matrix_bytes / 1e6:.1f} MB "
             f"(÷{f.matrix_bytes / max(q.matrix_bytes, 1):.1f}). Kernel: {r.kernel}. Output check on {a.positions} positions: "
             f"top-1 agreement {a.top1_agreement:.0%}, largest logit difference {a.max_abs_logit_diff:.3f}, relative error "
             f"{a.rel_error:.3f}. Decode TPOT {decode.words()}, prefill TTFT {prefill.words()}.",
             _bridge_vs_valley(decode, prefill)]
    byte_ratio = f.matrix_bytes / max(q.matrix_bytes, 1)
    if decode.verdict == "faster" and decode.median < byte_ratio:
        lines.append(f"Decode gains less than the byte ratio (×{byte_ratio:.1f}): the KV cache's bytes, turning int8 "
                     "back into numbers, and the per-step overhead do not shrink with the weights.")
    if getattr(r, "run_row", None) is not None:
        lines.append(f"Both ran the same decode loop (int8's with its own matrix kernel), so the comparison is of the "
                     f"weights' format, not of two programs. A Run here takes another path for "
                     f"float: **{r.run_row.label}**, {spread_words(r.run_row)}; against it int8 is "
                     f"{Effect(tuple(_paired(r.run_row.tpot_runs, q.tpot_runs, r.run_row.tpot_s, q.tpot_s))).words()} "
                     "in TPOT.")
    lines.append(rows_notes([*r.rows, getattr(r, "run_row", None)]))
    if prefill.verdict == "slower":
        lines.append("Weight-only int8 leaves prefill the same arithmetic, and here it also pays for turning int8 back "
                     "into float before each wide matmul.")
    return " ".join(lines)


def kernels_summary(r, history=None) -> str:
    plain, fast = r.rows
    prefill, decode = effects("kernels", history or [r])
    lines = [f"Fast path here: **{r.fast_label}**. Both read the same {plain.matrix_bytes / 1e6:.0f} MB of weight "
             f"matrices per decode step; only the way they are read differs. Decode TPOT {decode.words()}, "
             f"prefill TTFT {prefill.words()}. Same greedy tokens: {'yes' if r.same_tokens else 'NO'}.",
             _bridge_vs_valley(decode, prefill)]
    if decode.verdict == "faster":
        lines.append("A GEMV reads each weight once for one multiply-add, so a kernel that streams the matrix in the "
                     "order the cache lines and vector units want brings the bridge closer to the memory's own speed.")
    lines.append(rows_notes(r.rows))
    return " ".join(lines)


def overhead_summary(r) -> str:
    return (f"Real decode step: {ms(r.real_step_s)}. Same-depth skeleton (math ≈ 0): {ms(r.skeleton_step_s)}. So about "
            f"{r.overhead_share:.0%} of each step is overhead that more bandwidth or more FLOP/s alone do not buy back (a "
            f"faster host, fewer launches or a fused step do). Method: {r.method}")


PROFILE_INTRO = ("torch.profiler records every operator of one prefill and of a few decode steps. Prefill's matrix "
                 "products have many rows (one per prompt token): GEMM, the wide valley. Decode's have one row: GEMV, "
                 "the single-plank bridge, where each weight is read for one multiply-add.")


def profile_summary(result) -> str:
    p, d = result.prefill, result.decode
    gemm = p.by_kind.get("GEMM (matrix × matrix)", 0.0) / p.wall_ms if p.wall_ms else 0.0
    gemv = d.by_kind.get("GEMV (matrix × vector)", 0.0) / d.wall_ms if d.wall_ms else 0.0
    return (f"Prefill of {result.n_prompt} tokens: {p.wall_ms:.1f} ms, {gemm:.0%} in GEMM. One decode step: {d.wall_ms:.1f} ms, "
            f"{gemv:.0%} in GEMV. {result.note} {run_path_words(result)}")


def run_path_words(result) -> str:
    """The profiled request against the same request timed on a Run's path without the profiler (medians of its
    runs, their spread and CPU wait); '' for a result without those runs."""
    from engine.labs.timed_request import cpu_wait_of_timings

    runs = getattr(result, "run_timings", None) or []
    if not runs:
        return ""
    pre, step = Repeated.of([t.ttft_s for t in runs]), Repeated.of([t.tpot_s for t in runs])
    apart = lambda r: f"{r.n} runs {r.spread:.0%} apart" if r.n >= 2 else "one run"  # noqa: E731
    wait = cpu_wait_of_timings(runs)
    return " ".join(x for x in (
        f"The hooks that label attention and MLP make every profiled pass run through {result.profiled_path}; a Run "
        f"here takes the {result.run_path}. The same request timed on a Run's path, without the profiler: prefill "
        f"{pre.median * 1e3:,.1f} ms ({apart(pre)}), a decode step {step.median * 1e3:,.1f} ms ({apart(step)}). The "
        "profile shows where the time goes; these are the times a Run gets.", busy_banner(wait) or "",
        cpu_wait_words(wait)) if x)
