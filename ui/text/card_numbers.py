"""The card model's numbers for the pages: MFU and MBU of this machine's measured phases, both crossovers (measured here
and computed for each card), the KV-cache memory wall, a request's cost by stage and the H100 -> H200 comparison.

Streamlit-free: each builder returns words, DataFrames or plain values that say what they are — measured here (and
when), or an estimate of the card model (engine/perfmodel/card_model.py) from a spec sheet.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from engine.errors import EngineError
from engine.perfmodel import card_model as cm
from engine.perfmodel import cards as cd
from engine.perfmodel import roofline as rl
from engine.perfmodel.model_shapes import MODELS, model_shape
from ui.text import runs

CARDS = {c.name: c.key for c in cd.CARDS.values()}  # display name -> key, the spec-sheet cards
MODELS_BY_NAME = {m.name: m.key for m in MODELS.values()}
DTYPES = {"float16": "bf16 / fp16 (2 bytes)", "float32": "fp32 (4 bytes)", "fp8": "fp8 (1 byte, cards with fp8 units)",
          "q8_0": "8-bit weights (llama.cpp Q8_0)", "q4_0": "4-bit weights (llama.cpp Q4_0)"}
ESTIMATE = "estimate (card model: spec sheet x fitted class efficiencies)"
WALL_MODELS = ["llama-2-7b", "mistral-7b", "llama-3.1-8b", "llama-2-13b"]  # MHA beside GQA at 7-13 B parameters
COMPARISON_MODEL = "llama-3.1-8b"  # the H100 -> H200 comparison: bf16, 2,048 tokens in, 256 out, batch 16


def measured_here(trace, peaks=None) -> bool:
    """Whether the run was measured by this dashboard's engine in this session (not a recording read from a file, not
    a server over HTTP) and, given peaks, on their device and number format: only then may its times be set against
    this machine's peaks."""
    if trace is None or runs.origin(trace) != "local":
        return False
    return peaks is None or (str(trace.device) == str(peaks.device) and trace.dtype == peaks.dtype)


def run_against_peaks(trace, peaks=None) -> bool:
    """measured_here, with decode steps and the model's shapes: a run whose MFU and MBU the labs may compute."""
    return trace is not None and bool(trace.steps) and trace.model_config is not None and measured_here(trace, peaks)


def this_card(peaks, trace=None) -> cd.Card:
    """This machine as a card: the peaks the dashboard measured here (engine/labs/hardware.py), and when; with a run
    measured here, that run's own MFU and MBU in place of the CPU class's estimates."""
    read = getattr(peaks, "read_bytes_per_s", None) or peaks.copy_bytes_per_s / 2  # a copy reads and writes
    when = getattr(peaks, "measured_at", "")
    measured = {u.name: cd.Param(u.value, u.value, u.value, f"measured here: {u.words}")
                for u in measured_utilisation(trace, peaks)}
    if "MFU" in measured and "MBU" in measured:
        mbu = _step_mbu(trace, peaks, read, measured["MFU"].value)
        measured["MBU"] = cd.Param(mbu, mbu, mbu, measured["MBU"].source + "; the card's MBU is the share that, with "
                                   "the step's FLOPs at the prefill's MFU, gives back the measured step")
    return cd.measured_card(peaks.matmul_flops_per_s, read, getattr(peaks, "memory_bytes", None) or 0.0,
                            f"at {when}" if when else "in this session", getattr(peaks, "device", "cpu"),
                            measured.get("MFU"), measured.get("MBU"))


def _step_mbu(trace, peaks, read: float, mfu: float) -> float:
    """The bandwidth share that makes the card model's decode step (its FLOPs at `mfu`, its bytes at this share,
    joined by the soft roofline) last as long as the step measured here."""
    dec = next(p for p in rl.trace_points(trace) if p.phase == "decode")
    t = dec.seconds
    compute = dec.flops_per_s * t / (peaks.matmul_flops_per_s * mfu)
    p = cd.OVERLAP.value
    memory = (t ** p - compute ** p) ** (1 / p) if compute < 0.9 * t else 0.1 * t  # compute alone would not fit in it
    return dec.bytes_per_s * t / (read * memory)


def setup(model: str, card: str | cd.Card, dtype: str = "float16", gpus: int = 1) -> cm.Setup:
    """A model (key or display name) on a card (key, display name or Card)."""
    shape = model_shape(MODELS_BY_NAME.get(model, model))
    the_card = card if isinstance(card, cd.Card) else cd.card(CARDS.get(card, card))
    return cm.Setup(shape.config, the_card, dtype, gpus, shape.name)


def cards_with(peaks=None, trace=None) -> dict[str, cd.Card]:
    """The spec-sheet cards by name, and this machine's measured card first when its peaks are measured (with the
    MFU and MBU of `trace`, a run measured here, when given)."""
    mine = None if peaks is None else this_card(peaks, trace)
    out = {} if mine is None else {mine.name: mine}
    out.update({c.name: c for c in cd.CARDS.values()})
    return out


def where_from(card: cd.Card) -> str:
    return f"measured here {card.measured_at}" if card.measured_at else card.origin


# --- §3: MFU of a measured prefill, MBU of a measured decode step ----------------------------------------------
@dataclass(frozen=True)
class Utilisation:
    name: str  # "MFU" or "MBU"
    value: float  # share of this machine's measured peak
    peak: float  # this machine's measured peak it is compared with
    words: str


# a share above 100 %: the peak is a measurement too (engine/labs/hardware.py), taken at another moment
OVER_PEAK = {
    "MFU": "; above 100 %: the peak is itself a measurement, a matmul at the model's shapes taken at another moment, "
           "and this prefill beat it: by the two measurements' spread, by kernels faster than the probe's matmul, or "
           "because other programs held the cores while the peak was measured (the Roofline lab measures it again)",
    "MBU": "; above 100 %: the bandwidth is itself a measurement, a 256 MiB streaming read taken at another moment, "
           "and this step beat it: by the two measurements' spread, by far where the weights fit in the device's caches "
           "(256 MiB does not), or because other programs held the cores while it was measured (the Roofline lab "
           "measures it again)",
}


def measured_utilisation(trace, peaks) -> list[Utilisation]:
    """The run's prefill as a share of this machine's measured matmul FLOP/s (MFU), its median decode step as a share
    of the measured read bandwidth (MBU). FLOPs and bytes come from the formulas; the times were measured here."""
    if trace is None or peaks is None or trace.model_config is None:
        return []
    read = getattr(peaks, "read_bytes_per_s", None) or peaks.copy_bytes_per_s / 2
    when = getattr(peaks, "measured_at", "") or "in this session"
    out = []
    for p in rl.trace_points(trace):
        if p.phase == "prefill":
            v = p.flops_per_s / peaks.matmul_flops_per_s
            out.append(Utilisation("MFU", v, peaks.matmul_flops_per_s,
                                   f"the prefill of {trace.n_prompt} tokens reached {p.flops_per_s / 1e9:,.1f} GFLOP/s: "
                                   f"{v:.0%} of the {peaks.matmul_flops_per_s / 1e9:,.1f} GFLOP/s a matmul at the "
                                   f"model's shapes reaches on this machine (measured {when})"))
        else:
            v = p.bytes_per_s / read
            out.append(Utilisation("MBU", v, read,
                                   f"the median decode step read {p.bytes_per_s / 1e9:,.1f} GB/s (weights + KV cache): "
                                   f"{v:.0%} of the {read / 1e9:,.1f} GB/s a streaming read reaches on this machine "
                                   f"(measured {when})"))
    return [replace(u, words=u.words + OVER_PEAK[u.name]) if u.value > 1 else u for u in out]


# --- §3: the two crossovers, measured here and computed for each card ------------------------------------------
def crossover_table(model: str, dtype: str = "float16", context: int = 1024, peaks=None, trace=None) -> pd.DataFrame:
    """For each card: its ridge, the prompt length where the valley turns compute-bound, the batch where the bridge
    does (at `context` tokens of cache). This machine first, from its measured peaks, when they are measured."""
    rows = []
    for name, c in cards_with(peaks, trace).items():
        the_dtype = "float32" if c.device_class == "cpu" and dtype in ("float16", "bfloat16") else dtype
        s = setup(model, c, the_dtype)
        try:
            c.peak(s.fmt.compute)  # where the bends turn needs no room for the weights, only the card's format
        except EngineError as e:
            rows.append({"card": name, "from": where_from(c), "ridge (FLOP/byte)": None,
                         "valley compute-bound from (tokens)": None, "bridge compute-bound from (batch)": None,
                         "note": str(e)})
            continue
        batch = cm.crossover_batch(s, context)
        notes = [] if batch is not None else ["the bridge never: each rider's KV cache grows the bytes as fast"]
        if s.weight_bytes > s.usable_bytes:
            notes.append(f"the weights ({s.weight_bytes / 1e9:.0f} GB) do not fit in one")
        rows.append({"card": name, "from": where_from(c), "ridge (FLOP/byte)": round(c.ridge(s.fmt.compute), 1),
                     "valley compute-bound from (tokens)": cm.crossover_prompt(s),
                     "bridge compute-bound from (batch)": batch, "note": "; ".join(notes)})
    return pd.DataFrame(rows)


def crossover_words(cfg, name: str, peaks, dtype: str = "float32", context: int = 1024, trace=None) -> str:
    """The crossovers on this machine for the model it runs (`cfg`, a ModelConfig), computed from its measured peaks:
    where the valley and the bridge turn compute-bound."""
    s = cm.Setup(cfg, this_card(peaks, trace), dtype if dtype in cm.DTYPES else "float32", 1, name)
    t, b = cm.crossover_prompt(s), cm.crossover_batch(s, context)
    bridge = (f"the bridge from a batch of {b:,}" if b is not None
              else "the bridge never (each rider's KV cache adds bytes as fast as FLOPs)")
    return (f"On this machine (peaks measured {s.card.measured_at}; ridge {s.card.ridge(s.fmt.compute):.1f} FLOP/byte "
            "against its streaming-read bandwidth, the card model's, beside the roofline's against the copy) "
            f"{s.model_name} in {dtype} turns compute-bound: the valley from a prompt of {t:,} tokens, {bridge} at "
            f"{context:,} tokens of context. Computed with the card model from the measured peaks.")


# --- §3: the KV-cache memory wall ---------------------------------------------------------------------------------
def kv_wall_table(models: list[str], card: str | cd.Card, tokens: int, dtype: str = "float16") -> pd.DataFrame:
    """How many sequences of `tokens` tokens each model's KV cache lets the card hold beside the weights, with its
    grouped-query attention and as if every query head had its own KV head: GQA buys batch capacity, not only bytes."""
    rows = []
    for m in models:
        s = setup(m, card, dtype)
        shape = s.model
        rows.append({"model": s.model_name, "KV heads / query heads": f"{shape.n_kv_heads} / {shape.n_heads}",
                     "weights (GB)": round(s.weight_bytes / 1e9, 1),
                     "KV per token (kB)": round(s.kv_bytes_per_token / 1e3, 1),
                     "KV per sequence (GB)": round(s.kv_bytes_per_token * tokens / 1e9, 2),
                     "most sequences": cm.max_sequences(s, tokens),
                     "most sequences with one KV head per query head": cm.max_sequences(s, tokens, mha=True)})
    return pd.DataFrame(rows)


def kv_wall_words(table: pd.DataFrame, card_name: str, tokens: int) -> str:
    lines = []
    for _, r in table.iterrows():
        gqa, mha = r["most sequences"], r["most sequences with one KV head per query head"]
        more = f" ({gqa / mha:.0f}x more)" if mha and gqa > mha else ""
        lines.append(f"{r['model']}: {gqa:,} sequences{more}" + (f", {mha:,} without grouped-query attention"
                                                                  if gqa != mha else ""))
    return (f"The most sequences of {tokens:,} tokens {card_name} holds = (memory - weights) / KV cache per sequence "
            f"({ESTIMATE}): " + "; ".join(lines) + ".")


# --- §2/§4: a request's cost by stage, and which card for which stage ----------------------------------------------
def cost_split(model: str, card: str | cd.Card, prompt: int, output: int, batches: tuple[int, ...] = (1, 64),
               dtype: str = "float16", gpus: int = 1) -> list[cm.Cost]:
    """Device-seconds one request costs by stage at each batch (capped at what the memory holds)."""
    s = setup(model, card, dtype, gpus).check()
    most = cm.max_sequences(s, prompt + output)
    if most < 1:
        raise EngineError(f"{s.model_name} with {prompt + output} tokens does not fit on {s.card.name}")
    out = []
    for b in batches:
        b = min(b, most)
        if all(c.batch != b for c in out):
            out.append(cm.cost(s, prompt, output, b))
    return out


def costs_or_message(model: str, card: str | cd.Card, prompt: int, output: int, batches: tuple[int, ...] = (1, 64),
                     dtype: str = "float16") -> tuple[list[cm.Cost], str | None]:
    """cost_split, or the one line saying why there is no cost to show (the model does not fit on the card...)."""
    try:
        return cost_split(model, card, prompt, output, batches, dtype), None
    except EngineError as e:
        return [], str(e)


def cost_words(costs: list[cm.Cost], card_name: str, price_per_hour: float | None = None) -> str:
    """Which stage eats the money: each batch's split of a request's device-seconds."""
    parts = []
    for c in costs:
        money = f", {c.dollars(price_per_hour) * 1000:.3g} per thousand requests" if price_per_hour else ""
        parts.append(f"at B = {c.batch} a request costs {c.prefill_s * 1e3:,.1f} device-ms of prefill and "
                     f"{c.decode_s * 1e3:,.1f} of decode (prefill {c.prefill_share:.0%}{money})")
    first, last = costs[0], costs[-1]
    verdict = ""
    if len(costs) > 1:
        shrink = first.prefill_s / last.prefill_s if last.prefill_s > 0 else float("nan")
        prefill = ("a prefill's cost stays about the same (it is compute-bound: batching adds work, not sharing)"
                   if shrink < 1.25 else f"a prefill's shrinks only x{shrink:.1f} (this prompt is short enough to be "
                   "partly memory-bound, so the riders share some of its weight reads)")
        moves = "grows" if last.prefill_share > first.prefill_share else "goes"
        verdict = (f"Batching shares each decode step among the riders (x{first.decode_s / last.decode_s:.1f} cheaper a "
                   f"request) while {prefill}: the valley's share of the money {moves} from {first.prefill_share:.0%} "
                   f"to {last.prefill_share:.0%}")
    return f"On {card_name} ({ESTIMATE}): " + "; ".join(parts) + (f". {verdict}." if verdict else ".")


def stage_cards(model: str, prompt: int, output: int, prices: dict[str, float], decode_batch: int = 64,
                dtype: str = "float16", cards: dict[str, cd.Card] | None = None) -> pd.DataFrame:
    """Which card for which stage: each card's money per thousand requests for the prefill (alone: batching does not
    shrink it) and for the decode (among up to `decode_batch` riders), at the given prices per card-hour."""
    rows = []
    for name, c in (cards or cards_with()).items():
        price = prices.get(name)
        the_dtype = "float32" if c.device_class == "cpu" else dtype
        try:  # cost_split checks the setup: the model fits on the card in this format
            (pre,) = cost_split(model, c, prompt, output, (1,), the_dtype)
            dec = cost_split(model, c, prompt, output, (decode_batch,), the_dtype)[0]
        except EngineError as e:
            rows.append({"card": name, "note": str(e)})
            continue
        row = {"card": name, "prefill device-ms": round(pre.prefill_s * 1e3, 2),
               f"decode device-ms (B = {dec.batch})": round(dec.decode_s * 1e3, 2), "note": where_from(c)}
        if price is not None:
            row["prefill per 1k requests"] = round(pre.prefill_s / 3600 * price * 1000, 4)
            row["decode per 1k requests"] = round(dec.decode_s / 3600 * price * 1000, 4)
        rows.append(row)
    return pd.DataFrame(rows)


# --- §4: H100 -> H200, the same FLOP/s and 1.43x the bandwidth ---------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    model: str
    slow: str
    fast: str
    ttft_s: tuple[float, float]
    tpot_s: tuple[float, float]
    flops_ratio: float  # spec sheets: fast / slow
    bandwidth_ratio: float

    @property
    def prefill_speedup(self) -> float:
        return self.ttft_s[0] / self.ttft_s[1]

    @property
    def decode_speedup(self) -> float:
        return self.tpot_s[0] / self.tpot_s[1]


def compare_cards(model: str = "llama-3.1-8b", slow: str = "h100-sxm", fast: str = "h200", dtype: str = "float16",
                  prompt: int = 2048, output: int = 256, batch: int = 16) -> Comparison:
    a, b = setup(model, slow, dtype), setup(model, fast, dtype)
    pa, pb = cm.plan(a, prompt, output, batch), cm.plan(b, prompt, output, batch)
    fmt = a.fmt.compute
    return Comparison(a.model_name, a.card.name, b.card.name, (pa.ttft_s, pb.ttft_s), (pa.tpot_s, pb.tpot_s),
                      b.card.peak(fmt) / a.card.peak(fmt), b.card.bytes_per_s / a.card.bytes_per_s)


SAME_SPEED = 1.05  # a stage whose estimated speed-up stays under this "does not get faster"


def comparison_headline(c: Comparison) -> str:
    """'only the bridge gets faster' when the card model's numbers say so, else both speed-ups in words."""
    if c.decode_speedup >= SAME_SPEED > c.prefill_speedup:
        return "only the bridge gets faster"
    if c.prefill_speedup >= SAME_SPEED > c.decode_speedup:
        return "only the valley gets faster"
    return f"the valley x{c.prefill_speedup:.2f}, the bridge x{c.decode_speedup:.2f}"


def comparison_words(c: Comparison) -> str:
    why = ""
    if c.decode_speedup >= SAME_SPEED and c.decode_speedup < c.bandwidth_ratio:
        why = (", the bridge by less than the bandwidth because each step's fixed cost (launches, sampling) does not "
               "shrink")
    return (f"{c.slow} -> {c.fast}: the spec sheets give {c.flops_ratio:.2f}x the FLOP/s and {c.bandwidth_ratio:.2f}x the "
            f"bandwidth. For {c.model} the card model ({ESTIMATE}) gives the valley (TTFT) x{c.prefill_speedup:.2f} and "
            f"the bridge (TPOT) x{c.decode_speedup:.2f}: {comparison_headline(c)}{why}. Published (NVIDIA's TensorRT-LLM v0.9.0 "
            "benchmark table, Llama-2-7B in fp8, fake weights; its rows in assets/published/gpu_measurements.csv): TTFT "
            "x1.02 at 2,048 tokens, TPOT x1.14 at batch 1 and x1.18 at batch 16.")


# --- §3: a decode step's cost against the context, up to the window or the memory ---------------------------------
def tpot_by_context(model: str, card: str | cd.Card, dtype: str = "float16", batch: int = 1,
                    points: int = 12) -> pd.DataFrame:
    """The card model's decode step at contexts from 128 tokens to the model's window (or as far as `batch` caches fit
    beside the weights): the bridge's cost grows linearly with the context it reads."""
    s = setup(model, card, dtype).check()
    room = (s.usable_bytes - s.weight_bytes) / (batch * s.kv_bytes_per_token)
    top = int(min(s.model.max_seq_len, room))
    rows = []
    if top < 128:
        return pd.DataFrame(rows)
    step = max(1, (top - 128) // max(points - 1, 1))
    for ctx in range(128, top + 1, step):
        p = cm.decode_step(s, ctx, batch)
        rows.append({"context (tokens)": ctx, "TPOT (ms, est.)": round(p.seconds * 1e3, 3),
                     "KV cache read (GB)": round(batch * ctx * s.kv_bytes_per_token / 1e9, 3),
                     "weights read (GB)": round(s.weight_bytes / 1e9, 3), "bound by": p.bound})
    return pd.DataFrame(rows)


def tpot_by_context_or_message(model: str, card: str | cd.Card, dtype: str = "float16",
                               batch: int = 1) -> tuple[pd.DataFrame, str | None]:
    """tpot_by_context, or the one line saying why there is none (the model does not fit on the card...)."""
    try:
        table = tpot_by_context(model, card, dtype, batch)
    except EngineError as e:
        return pd.DataFrame(), str(e)
    return (table, None) if len(table) else (table, f"{batch} caches of 128 tokens do not fit beside the weights")
