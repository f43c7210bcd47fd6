"""What `python -m engine plan` prints: a card model's plan as plain data (JSON) or as a table a person reads.

Every number carries what it is: an estimate of the card model (engine/perfmodel/card_model.py) from a spec sheet
and class efficiencies fitted on published measurements, each efficiency with its source and range; this machine's
card says when its peaks were measured here.
"""
from __future__ import annotations

from dataclasses import asdict

from engine.perfmodel import card_model as cm
from engine.perfmodel import cards as cd

COST_BATCHES = (1, 64)  # "which stage eats the money": a request's device-seconds alone and among 64 riders


def _cost(setup: cm.Setup, plan: cm.RequestPlan, batch: int, price: float | None) -> dict | None:
    """A request's device-seconds by stage among `batch` riders, or among as many as the memory holds."""
    wanted, most = batch, cm.max_sequences(setup, plan.prompt + plan.output)
    batch = min(batch, most)
    if batch < 1:
        return None
    c = cm.cost(setup, plan.prompt, plan.output, batch)
    out = {"batch": batch, "prefill_device_s": c.prefill_s, "decode_device_s": c.decode_s,
           "prefill_share": c.prefill_share}
    if batch < wanted:
        out["wanted_batch"] = wanted  # that many do not fit beside the weights: the most that do
    if price is not None:
        out["dollars_per_request"] = c.dollars(price)
        out["dollars_per_million_output_tokens"] = c.dollars(price) / max(plan.output, 1) * 1e6
    return out


def report(plan: cm.RequestPlan, price_per_hour: float | None = None) -> dict:
    s = plan.setup
    c = s.card
    seq = plan.prompt + plan.output
    # the class's values, those measured on this machine in their place, and the roofline's overlap
    params = {name: asdict(p) for name, p in {**c.klass.params(), **c.efficiency, "overlap": cd.OVERLAP}.items()}
    fmt = s.fmt.compute
    cross_b = cm.crossover_batch(s, plan.context)
    costs = []
    for b in sorted({*COST_BATCHES, plan.batch}):
        x = _cost(s, plan, b, price_per_hour)
        if x and all(x["batch"] != c["batch"] for c in costs):
            costs.append(x)
    return {
        "what": "estimate: the card model (engine/perfmodel/card_model.py), spec sheet x class efficiencies "
                "fitted on published measurements (docs/performance-model.md)",
        "model": s.model_name, "card": c.key, "card_name": c.name, "dtype": s.dtype, "gpus": s.gpus,
        "batch": plan.batch, "prompt_tokens": plan.prompt, "output_tokens": plan.output, "context": plan.context,
        "ttft_ms": plan.ttft_s * 1e3, "tpot_ms": plan.tpot_s * 1e3,
        "tpot_first_ms": plan.first_step.seconds * 1e3, "tpot_last_ms": plan.last_step.seconds * 1e3,
        "total_ms": plan.total_s * 1e3, "prefill_share": plan.prefill_share,
        "prefill_bound": plan.prefill.bound, "decode_bound": plan.decode.bound,
        "prefill": _pass_dict(plan.prefill), "decode": _pass_dict(plan.decode),
        "mfu": c.param("mfu").value, "mbu": c.param("mbu").value,
        "layer_overhead_us": c.param("layer_s").value * 1e6, "pass_overhead_ms": c.param("pass_s").value * 1e3,
        "matmul_tflops": c.matmul(fmt) / 1e12, "peak_tflops": c.peak(fmt) / 1e12,
        "bandwidth_gb_s": c.bytes_per_s / 1e9, "memory_gb": c.memory_bytes / 1e9,
        "ridge_flop_per_byte": c.ridge(fmt),
        "ridge_reached_flop_per_byte": c.matmul(fmt) * c.param("mfu").value / (c.bytes_per_s * c.param("mbu").value),
        "crossover_prompt_tokens": cm.crossover_prompt(s, plan.batch),
        "crossover_batch": cross_b,
        "weights_gb": s.weight_bytes / 1e9,
        "kv_bytes_per_token": s.kv_bytes_per_token,
        "kv_gb_per_sequence": s.kv_bytes_per_token * seq / 1e9,
        "max_sequences": cm.max_sequences(s, seq),
        "max_sequences_if_mha": cm.max_sequences(s, seq, mha=True),
        "cost": costs,
        "card_source": c.source, "card_note": c.note, "measured_at": c.measured_at,
        "class": c.klass.name, "parameters": params,
    }


def _pass_dict(p: cm.Pass) -> dict:
    return {"compute_ms": p.compute_s * 1e3, "memory_ms": p.memory_s * 1e3, "roof_ms": p.roof_s * 1e3,
            "overhead_ms": p.overhead_s * 1e3, "comm_ms": p.comm_s * 1e3, "intensity_flop_per_byte": p.intensity,
            "bound": p.bound}


def _ms(x: float) -> str:
    return f"{x:,.3f} ms" if x < 10 else f"{x:,.1f} ms"


def text(r: dict) -> str:
    """The plan as a table, then where each number comes from."""
    gpus = f"{r['gpus']} x " if r["gpus"] > 1 else ""
    lines = [f"{r['model']} on {gpus}{r['card_name']}, {r['dtype']}: {r['prompt_tokens']:,} tokens in, "
             f"{r['output_tokens']:,} out, batch {r['batch']} ({r['what']})", ""]
    rows = [
        ("TTFT (prefill)", _ms(r["ttft_ms"]), f"bound by {r['prefill_bound']}"),
        ("TPOT at context " + f"{r['context']:,}", _ms(r["tpot_ms"]), f"bound by {r['decode_bound']}"),
        ("TPOT first / last step", f"{_ms(r['tpot_first_ms'])} / {_ms(r['tpot_last_ms'])}", "the cache grows each step"),
        ("whole request", _ms(r["total_ms"]), f"prefill {r['prefill_share']:.0%} of it"),
        ("ridge (spec) / as reached", f"{r['ridge_flop_per_byte']:,.0f} / {r['ridge_reached_flop_per_byte']:,.0f}",
         "FLOP per byte"),
        ("prefill compute-bound from", _tokens(r["crossover_prompt_tokens"], "tokens"), f"at batch {r['batch']}"),
        ("decode compute-bound from", _tokens(r["crossover_batch"], "sequences"), f"at context {r['context']:,}"),
        ("weights / KV per token", f"{r['weights_gb']:,.1f} GB / {r['kv_bytes_per_token'] / 1e3:,.0f} kB", ""),
        ("sequences the memory holds", f"{r['max_sequences']:,}",
         f"{r['max_sequences_if_mha']:,} with one KV head per query head"),
    ]
    for c in r["cost"]:
        money = f", ${c['dollars_per_request']:.6f} a request" if "dollars_per_request" in c else ""
        capped = f" (the most that fit, not {c['wanted_batch']})" if "wanted_batch" in c else ""
        rows.append((f"device-seconds a request, B={c['batch']}{capped}",
                     f"{c['prefill_device_s'] * 1e3:,.2f} + {c['decode_device_s'] * 1e3:,.2f} ms",
                     f"prefill + decode: prefill {c['prefill_share']:.0%}{money}"))
    width = max(len(a) for a, _, _ in rows)
    value = max(len(b) for _, b, _ in rows)
    lines += [f"  {a:<{width}}  {b:>{value}}  {c}".rstrip() for a, b, c in rows]
    lines += ["", f"card: {r['card_source']}" + (f" ({r['card_note']})" if r["card_note"] else "")]
    lines.append(f"class: {r['class']}")
    for name in ("mamf", "mfu", "mbu", "layer_s", "pass_s", "allreduce_s", "overlap"):
        p = r["parameters"].get(name)
        if p is None:
            continue
        lines.append(f"  {name} = {_param(name, p['value'])} (range {_param(name, p['low'])}-{_param(name, p['high'])})"
                     f": {p['source']}")
    return "\n".join(lines)


def _tokens(n: int | None, unit: str) -> str:
    return "never (the KV cache grows as fast)" if n is None else f"{n:,} {unit}"


def _param(name: str, v: float) -> str:
    return f"{v * 1e6:.0f} µs" if name.endswith("_s") else f"{v:.2f}"
