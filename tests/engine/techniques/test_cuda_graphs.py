"""The static-shape decode step (the one CUDA graphs capture) equals the eager decode step."""
import pytest
import torch

import engine
from engine.core.generate import new_cache
from engine.techniques.cuda_graphs import graphed_steps, static_decode_step


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_static_decode_matches_eager_decode(name):
    lm = engine.load_model(name)
    ids = torch.tensor([lm.tokenizer.encode("the bridge takes one rider at a time")] * 2)  # (2, T)
    eager, static = new_cache(lm, 2, ids.shape[1] + 6), new_cache(lm, 2, ids.shape[1] + 6)
    token = engine.prefill(lm, ids, eager).argmax(-1)
    engine.prefill(lm, ids, static)
    for _ in range(5):
        positions = torch.from_numpy(static.lengths).view(-1, 1)  # (B, 1): a tensor, as a CUDA graph needs
        want = engine.decode_step(lm, token, eager)
        got = static_decode_step(lm, token.view(-1, 1), positions, static)
        static.advance(1)  # the static step keeps no host-side books
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        token = want.argmax(-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU (CI has none)")
def test_cuda_graph_decode_gives_the_same_tokens():
    from engine.techniques.cuda_graphs import GraphedDecoder

    lm = engine.load_model("tiny-llama", device="cuda")
    ids = torch.tensor([lm.tokenizer.encode("the valley is wide")], device="cuda")
    eager, graphed = new_cache(lm, 1, ids.shape[1] + 8), new_cache(lm, 1, ids.shape[1] + 8)
    a = engine.prefill(lm, ids, eager).argmax(-1)
    b = engine.prefill(lm, ids, graphed).argmax(-1)
    decoder = GraphedDecoder(lm, graphed)
    for _ in range(6):
        a = engine.decode_step(lm, a, eager).argmax(-1)
        b = decoder.step(b).argmax(-1)
        assert torch.equal(a, b)


def test_cuda_graph_measurement_refuses_cpu_with_a_clear_message(tiny_llama):
    from engine.labs import step_overhead

    if tiny_llama.device.type == "cuda":
        pytest.skip("runs on CUDA here")
    with pytest.raises(engine.EngineError, match="need a CUDA GPU"):
        step_overhead.measure_cuda_graphs(tiny_llama, "the sea", 4)
    with pytest.raises(engine.EngineError, match="need a CUDA GPU"):
        engine.generate(tiny_llama, "the sea", 4, make_step=graphed_steps(tiny_llama))


def test_gpu_check_parity_runs_where_it_can():
    """scripts/gpu_check.sh's parity step, on CPU (the CUDA run itself needs a GPU)."""
    from engine.labs import gpu_check

    for arch in ("llama", "gpt2"):
        passed, line, numbers = gpu_check.parity(arch, torch.device("cpu"))
        assert passed and numbers["max_logit_diff"] < 1e-4 and numbers["cached_same"], line
