"""The one sequence lifecycle: the stop rule (eos unless ignore_eos, then length, or cancelled), token pieces,
generate's rows as Sequences, and engine/core importing nothing from the layers above it."""
import ast
import dataclasses
from pathlib import Path

import pytest

import engine
from engine.core.prompting import token_pieces
from engine.core.sequence import Sequence, stop_reason

EOS = 2


def test_the_stop_rule():
    assert stop_reason(EOS, 1, 5, {EOS}) == "eos"
    assert stop_reason(EOS, 5, 5, {EOS}) == "eos"  # the text really ended: that wins over the length
    assert stop_reason(EOS, 1, 5, {EOS}, ignore_eos=True) is None
    assert stop_reason(EOS, 5, 5, {EOS}, ignore_eos=True) == "length"
    assert stop_reason(7, 4, 5, {EOS}) is None and stop_reason(7, 5, 5, {EOS}) == "length"


def test_a_sequence_owns_its_tokens_and_says_when_it_ends():
    seq = Sequence([5, 6], 3, eos_ids=[EOS])
    assert seq.last_token == 6 and seq.reserved_len == 5 and not seq.finished
    assert seq.append(9) is None and seq.append(10) is None
    assert seq.append(11) == "length" and seq.finished and seq.output_ids == [9, 10, 11]
    with pytest.raises(ValueError, match="already ended"):
        seq.append(12)
    seq.cancel()
    assert seq.stop_reason == "length"  # an ended sequence keeps its reason


def test_eos_ends_it_unless_ignored_and_cancel_ends_it_at_once():
    assert Sequence([5], 8, eos_ids=[EOS]).append(EOS) == "eos"
    ignoring = Sequence([5], 8, engine.SamplingParams(ignore_eos=True), eos_ids=[EOS])
    assert ignoring.append(EOS) is None
    ignoring.cancel()
    assert ignoring.stop_reason == "cancelled" and ignoring.finished


def test_latest_piece_joins_up_to_the_text(tiny_llama):
    tok = tiny_llama.tokenizer
    ids = tok.encode("the bridge, one rider at a time")
    seq = Sequence([1], len(ids))
    pieces = []
    for t in ids:
        seq.append(t)
        pieces.append(seq.latest_piece(tok))
    assert "".join(pieces) == tok.decode(ids) == "".join(token_pieces(tok, ids))


def test_generate_stops_each_row_by_the_same_rule(tiny_llama):
    free = engine.generate(tiny_llama, "the sea", 6, ignore_eos=True)
    assert free.stop_reason == "length" and free.n_output == 6
    lm = dataclasses.replace(tiny_llama, config=dataclasses.replace(tiny_llama.config,
                                                                 eos_token_ids=(free.output_ids[2],)))
    ended = engine.generate(lm, "the sea", 6)
    stop_at = free.output_ids.index(free.output_ids[2]) + 1
    assert ended.stop_reason == "eos" and ended.output_ids == free.output_ids[:stop_at]
    live = []
    engine.generate(tiny_llama, "the sea", 4, ignore_eos=True, on_step=lambda t: live.append(list(t.output_tokens)))
    assert len(live[-1]) == 4  # one live piece per token, the last one included


def test_core_imports_nothing_from_the_layers_above():
    above = ("engine.techniques", "engine.loading", "engine.serving", "engine.labs", "engine.perfmodel")
    core = Path(engine.__file__).parent / "core"
    for path in core.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.startswith(above)], f"{path.name} imports from above engine/core"


def test_cuda_graphs_refuse_a_cpu_model_before_any_work(tiny_llama):
    from engine.techniques.cuda_graphs import GraphedDecoder, graphed_steps

    if tiny_llama.device.type == "cuda":
        pytest.skip("runs on CUDA here")
    with pytest.raises(engine.EngineError, match="CUDA graphs need a CUDA GPU; this model runs on cpu"):
        graphed_steps(tiny_llama)
    with pytest.raises(engine.EngineError, match="need a CUDA GPU"):
        GraphedDecoder(tiny_llama, engine.KVCache(tiny_llama.config, 1, 8, tiny_llama.dtype))


def test_a_step_maker_replaces_the_decode_step(tiny_llama):
    built = []

    def counting_step(lm, cache):
        built.append(cache.length)
        return lambda token: engine.decode_step(lm, token, cache)

    plain = engine.generate(tiny_llama, "the sea", 5, ignore_eos=True)
    made = engine.generate(tiny_llama, "the sea", 5, ignore_eos=True, make_step=counting_step)
    assert made.output_ids == plain.output_ids and len(built) == 1  # built once, after the prefill
    assert made.settings["decode_step"] == "counting_step" and plain.settings["decode_step"] == "eager"
