"""The tiny random models are built with transformers once per machine, then read from the model cache: the same
weights, no transformers in a process that only runs them, and an unwritable cache still loads (built in memory)."""
import torch

import engine
from engine.loading import cache_folder, tiny
from tests.engine.test_start_up_imports import _run


def test_the_cached_copy_holds_the_built_weights(tmp_path):
    for arch in ("llama", "gpt2"):
        built = tiny.tiny_hf_model(arch)
        config, first = tiny.tiny_weights(arch, tmp_path)  # builds and writes the copy
        config, again = tiny.tiny_weights(arch, tmp_path)  # reads it back
        assert len(list(tmp_path.glob(f"tiny-{arch}-torch*/COMPLETE"))) == 1
        assert config.model_type == built.config.model_type and config.vocab_size == built.config.vocab_size
        expected = built.state_dict()
        if built.config.tie_word_embeddings:
            expected.pop("lm_head.weight")  # the embedding itself, stored once
        assert again.keys() == expected.keys()
        assert all(torch.equal(again[k], expected[k]) for k in expected)


def test_a_model_from_the_cache_is_the_built_model(tmp_path, monkeypatch, tiny_gpt2):
    """tiny_gpt2 (the session's) may have been built or read; this one is read: the same parameters, tied head too."""
    monkeypatch.setenv("TWO_BENDS_CACHE", str(tmp_path))
    tiny.tiny_weights("gpt2", tmp_path)
    cached = engine.load_model("tiny-gpt2", device="cpu").model.state_dict()
    built = tiny_gpt2.model.state_dict()
    assert cached.keys() == built.keys() and all(torch.equal(cached[k], built[k]) for k in built)


def test_a_process_that_runs_a_cached_tiny_model_imports_no_transformers():
    tiny.tiny_weights("llama", cache_folder.cache_root())  # the machine's copy, built here when there is none yet
    code = ("import sys, engine; engine.load_model('tiny-llama', device='cpu'); print('transformers' in sys.modules)")
    assert _run(code).splitlines()[-1] == "False"


def test_an_unwritable_cache_builds_in_memory(tmp_path):
    (tmp_path / "file").write_text("")
    config, state = tiny.tiny_weights("llama", tmp_path / "file")  # a file: no folder can be made under it
    assert config.model_type == "llama" and "lm_head.weight" in state
