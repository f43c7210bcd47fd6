"""The story pages' live physics in words: a bend is called compute-bound where the labs' rounds all say so, never on
one noisy round; the KV-cache wall counts grouped-query attention as batch capacity."""
import dataclasses

from engine.labs.context_sweep import ContextPoint, ContextSweep
from engine.labs.sweeps import SweepPoint, SweepResult
from ui.text import bend_numbers as bn


def ttft_point(tokens: int, runs: list[float]) -> SweepPoint:
    med = sorted(runs)[len(runs) // 2]
    return SweepPoint("prompt", 1, tokens, 8, med, 0.1, 0.02, 0.02, med + 0.1, tokens / med, 50.0, ttft_runs=runs,
                      tpot_runs=[0.02] * len(runs))


def prompt_sweep(points, model="m") -> SweepResult:
    return SweepResult("prompt", [p.prompt_tokens for p in points], points, model=model)


def test_the_valley_turns_compute_bound_where_every_round_says_so():
    flat_then_linear = [ttft_point(16, [0.10, 0.10, 0.11]), ttft_point(32, [0.105, 0.10, 0.11]),
                        ttft_point(64, [0.21, 0.20, 0.22])]
    words = bn.valley_measured(prompt_sweep(flat_then_linear), "m")
    assert "compute-bound between 32 and 64 tokens" in words
    linear = [ttft_point(16, [0.05, 0.05, 0.05]), ttft_point(32, [0.10, 0.10, 0.10])]
    assert "already at the shortest prompt measured" in bn.valley_measured(prompt_sweep(linear), "m")
    noisy = [ttft_point(16, [0.05, 0.20, 0.05]), ttft_point(32, [0.10, 0.05, 0.30])]
    assert "too busy to tell" in bn.valley_measured(prompt_sweep(noisy), "m")
    assert "not yet" in bn.valley_measured(prompt_sweep(linear, model="other"), "m")
    assert "fewer than 3 rounds" in bn.valley_measured(prompt_sweep([ttft_point(16, [0.05]), ttft_point(32, [0.1])]), "m")


def test_the_bridge_crossover_comes_from_the_batch_labs_rounds():
    def point(b, tpots):
        return SweepPoint("batch", b, 8, 4, 0.1, 0.1, sorted(tpots)[1], sorted(tpots)[1], 0.2, 80.0, b / sorted(tpots)[1],
                          tpot_runs=tpots, ttft_runs=[0.1] * 3, decode_path="flat batched loop (any batch)")

    result = SweepResult("batch", [1, 8], [point(1, [0.02, 0.021, 0.019]), point(8, [0.05, 0.052, 0.049])], model="m")
    assert "stops being bound by reading the weights at B = 8" in bn.bridge_measured(result, "m")
    busy = SweepResult("batch", [1, 8], [point(1, [0.02, 0.06, 0.019]), point(8, [0.05, 0.02, 0.049])], model="m")
    assert "stayed bound by reading the weights (or the machine was too busy" in bn.bridge_measured(busy, "m")


def test_context_words_set_the_step_beside_its_bytes():
    sweep = ContextSweep("m", "cpu", "float32", "fused C step (batch 1 only)", 500_000_000, 46_080, 8192,
                         "the model's window of 8,192 tokens", 6,
                         [ContextPoint(64, [0.020, 0.021, 0.020], 64 * 46_080),
                          ContextPoint(8185, [0.030, 0.031, 0.029], 8185 * 46_080)])
    words = bn.context_words(sweep)
    rounds = "(medians of 3 rounds), ×1.48 longer in every round"  # the rounds: ×1.50, ×1.48, ×1.45
    assert f"20.0 ms after 64 tokens and 30.0 ms after 8,185 {rounds}" in words
    assert f"×{(500_000_000 + 8185 * 46_080) / (500_000_000 + 64 * 46_080):.2f} the bytes" in words
    assert "stand-in numbers" in words and "window" in words
    busy = dataclasses.replace(sweep, points=[ContextPoint(64, [0.127, 0.502, 0.789], 64 * 46_080),
                                              ContextPoint(8185, [0.110, 0.479, 0.112], 8185 * 46_080)])
    assert "too busy to tell how the step grew" in bn.context_words(busy)  # the machine of this lab's first try


def test_the_wall_counts_grouped_query_attention_as_capacity(tiny_llama):
    cfg = tiny_llama.config
    table = bn.wall_table(cfg, "tiny", "float32", None, None, 256)
    group = cfg.n_heads // cfg.n_kv_heads
    assert len(table) > 3 and (table["format"] != "").all()
    for _, r in table.iterrows():
        assert r["most sequences"] >= group * r["with one KV head per query head"]
    assert f"{group}x as many sequences" in bn.wall_words(cfg, "tiny", 256)


