"""Fixtures shared by the fast paths' tests."""
import pytest

import engine


@pytest.fixture(scope="module")
def plain_llama():
    return engine.load_model("tiny-llama", device="cpu", kernels="plain")
