"""One model under either side's name: the room's serving engine runs the local model when the names agree."""
import pytest

from ui.engine_link.model_names import same_model


@pytest.mark.parametrize("remote, local, same", [
    ("smollm2-135m-instruct", "smollm2-135m", True), ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m", True),
    ("openai-community/gpt2", "gpt2", True), ("tiny-llama", "tiny-llama", True), ("gpt2", "smollm2-135m", False),
    ("meta-llama/Llama-3.1-8B", "smollm2-135m", False)])
def test_the_same_model_under_either_sides_name(remote, local, same):
    assert same_model(remote, local) is same
