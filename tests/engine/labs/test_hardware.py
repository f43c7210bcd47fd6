"""engine/labs/hardware.py's reader of a decode step's own bytes: the bench's second reference beside the floor."""
import torch

import engine
from engine.labs.hardware import step_bytes_reader
from engine.perfmodel.flops import decode_step_bytes


def test_the_reader_reads_each_matrix_once_and_the_kv_cache():
    for name in ("tiny-llama", "tiny-gpt2"):  # untied and tied (the embedding read once, as the head)
        lm = engine.load_model(name, device="cpu", kernels="plain")
        step_bytes = int(decode_step_bytes(lm.config, 65, 1, 4, 4))
        kv_bytes = int(step_bytes - lm.config.weight_bytes(4))
        reader = step_bytes_reader(lm.model, kv_bytes, torch.device("cpu"))
        linears = {m.weight.data_ptr(): m.weight for m in lm.model.modules() if isinstance(m, torch.nn.Linear)}
        assert reader.nbytes == sum(w.numel() * 4 for w in linears.values()) + kv_bytes // 4 * 4
        assert reader() > 0
        if lm.config.tie_embeddings:  # the floor's bytes, but for norms, biases and position embeddings
            assert 0.85 < reader.nbytes / step_bytes <= 1.0  # SmolLM2: 0.9997
