"""The prefix cache checks what it copies."""

import pytest

import engine


def test_copy_prefix_checks_the_length(tiny_llama):
    small, big = engine.KVCache(tiny_llama.config, 1, 8, tiny_llama.dtype), engine.KVCache(tiny_llama.config, 1, 8, tiny_llama.dtype)
    small.advance(3)
    with pytest.raises(ValueError, match="cannot copy 5 positions from a cache of 3"):
        big.copy_prefix_from(small, 5)
