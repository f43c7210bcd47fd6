"""The labs' fixtures: the tiny model with and without a fused batch-1 decode step, whatever this machine chose.

Whether a fast load keeps a fused decode step (the C step, torch.compile's) is measured on each machine, so a test
that needs one side gives the model that side itself: `plain_tiny` has none (the eager reference's Backends),
`fused_tiny` has a stand-in step in its Backends (the same maths as the flat loop, counting its calls)."""
import dataclasses

import pytest

import engine
from engine.techniques.kernels import with_kernels


class StandInStep:
    """A 'fused' batch-1 decode step for the tiny model (the same maths as its batched loop), counting its calls."""

    kind = "C"

    def __init__(self, model):
        self.model, self.calls, self.fallbacks = model, 0, 0

    def serves(self, cache, plan):
        return True

    def __call__(self, ids, cache, plan):
        self.calls += 1
        return self.model.decode_rows(ids, cache, plan)


@pytest.fixture
def plain_tiny():
    """The tiny model on the eager reference, no fused step: a model of its own (the same weights as `tiny_llama`),
    so no hook or thread another test left on the session's model can turn a pass away from its path."""
    return with_kernels(engine.load_model("tiny-llama", device="cpu"), "plain")


@pytest.fixture
def fused_tiny(plain_tiny):
    """The tiny model with a stand-in fused batch-1 step in its Backends, as a fast load that kept the C step has."""
    step = StandInStep(plain_tiny.model)
    return dataclasses.replace(plain_tiny, backends=dataclasses.replace(plain_tiny.backends, decode_step=step),
                               kernels=plain_tiny.kernels + "; decode step in C")
