"""Fitting a prompt to an exact token count, and the example prompts (ui/text/prompts.py)."""
import pytest

from ui.text import prompts


# ---------------------------------------------------------------- prompt fitting
@pytest.mark.parametrize("n", [1, 7, 64, 200])
def test_fit_trims_to_exact_count(tiny_llama, n):
    text = prompts.example("summarisation").text
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, n)
    full = tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    assert len(fit.ids) == n
    assert fit.ids == full[:n]  # trimmed from the end: the instruction at the start is kept
    assert fit.action == "trimmed"
    assert fit.text == tiny_llama.tokenizer.decode(fit.ids)


def test_fit_repeats_short_text_to_exact_count(tiny_llama):
    text = "Hello bridge."
    own = tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, 100)
    assert len(own) < 100 and len(fit.ids) == 100
    assert fit.ids[: len(own)] == own
    assert fit.action == "repeated" and fit.source_tokens == len(own)
    assert fit.text.count("Hello bridge.") >= 2


def test_fit_as_typed_keeps_the_text(tiny_llama):
    text = "<script>alert(1)</script> 你好 🌉"
    fit = prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, None)
    assert fit.ids == tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    assert fit.text == text and fit.action == "as typed"
    assert "exactly as typed" in prompts.describe_fit(fit)


@pytest.mark.parametrize("text", ["", "   \n "])
def test_fit_refuses_empty_text(tiny_llama, text):
    with pytest.raises(ValueError, match="empty"):
        prompts.fit_prompt_to_tokens(tiny_llama.tokenizer, text, 64)


def test_examples_cover_the_four_workloads():
    keys = {ex.key for ex in prompts.examples()}
    assert keys == {"translation", "summarisation", "code", "chat"}
    with pytest.raises(KeyError):
        prompts.example("poetry")


def test_long_examples_fill_1024_real_tokens(smollm_tokenizer):
    counts = {ex.key: len(smollm_tokenizer.encode(ex.text)) for ex in prompts.examples()}
    assert counts["summarisation"] >= 1000
    assert counts["translation"] >= 700
    fit = prompts.fit_prompt_to_tokens(smollm_tokenizer, prompts.example("summarisation").text, 1024)
    assert len(fit.ids) == 1024 and fit.action == "trimmed"
