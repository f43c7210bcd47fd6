"""Fixtures shared by the decode-step tests (test_compiled_decode.py, test_c_decode.py)."""
import pytest

import engine


@pytest.fixture(scope="module")
def plain_llama():
    return engine.load_model("tiny-llama", device="cpu", kernels="plain")
