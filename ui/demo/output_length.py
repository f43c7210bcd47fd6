"""How a run's output ended, said plainly on the story pages: early, at the model's end-of-text, or past it.

The output length is a variable the class sets, like the prompt's. With 'Exact output length' on (the default;
a link's `ignore_eos=1`, vLLM's name) the run writes M tokens even where the model's own answer ended sooner, as
serving benchmarks do; off, the model's end-of-text token ends the run, and a request asked for 64 tokens can come
back with one (all prefill, no bridge). Either way the page says what happened. Streamlit-free.
"""
from __future__ import annotations


def end_of_text_at(trace) -> int | None:
    """The 1-based position of the first end-of-text token among the run's output, None when there is none (or the
    run carries no model config: a server's run)."""
    eos = set((trace.config or {}).get("eos_token_ids") or ())
    return next((i for i, token in enumerate(trace.output_ids, start=1) if token in eos), None)


def early_end(trace) -> str | None:
    """One line when the model's end-of-text ended the run before the output length asked for; else None."""
    asked = trace.settings.get("max_new_tokens")
    if trace.stop_reason != "eos" or not isinstance(asked, int) or trace.n_output >= asked:
        return None
    k = trace.n_output
    bridge = ("decode ran no step at all: the whole run is prefill" if k <= 1
              else f"decode ran {k - 1} step{'s' * (k != 2)}, not {asked - 1}")
    return (f"The model ended its answer after {k} of the {asked} tokens asked for (it wrote its end-of-text token), "
            f"so {bridge}, and the time split shows that shorter request. To measure the length asked, switch on "
            f"'Exact output length' (sidebar, or `ignore_eos=1` in a link) and run again.")


def past_end(trace) -> str | None:
    """One line when the run went on past the model's own end-of-text (exact output length on); else None."""
    if not trace.settings.get("ignore_eos"):
        return None
    at = end_of_text_at(trace)
    if at is None or at >= trace.n_output:
        return None
    return (f"The model's own answer ended at token {at} (its end-of-text token); 'Exact output length' kept it "
            f"writing to the {trace.n_output} tokens asked, as serving benchmarks do. The text after that point is "
            "what the model writes when told to go on; a decode step's work is the same whichever token it writes.")
