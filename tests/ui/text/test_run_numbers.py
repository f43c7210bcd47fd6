"""ui/text/run_numbers.py: what the story pages read from one run, instead of importing engine.core.metrics."""
from engine.core.trace import DecodeStep, Trace
from ui.text import run_numbers


def trace_with(riders: list[int]) -> Trace:
    steps = [DecodeStep(0.01, 4 + i, 0, riders=r) for i, r in enumerate(riders)]
    return Trace(model="hand", device="cpu", dtype="float32", prompt_ids=[1, 2, 3], output_ids=list(range(len(riders) + 1)),
                 prefill_seconds=0.05, steps=steps, text="", env={})


def test_summary_and_sharing_note():
    alone, shared = trace_with([1, 1]), trace_with([1, 3])
    assert run_numbers.summary(alone).output_tokens == 3
    assert run_numbers.sharing_note(alone) is None and run_numbers.sharing_note(trace_with([])) is None
    assert run_numbers.sharing_note(shared).startswith("**Riders on the bridge.** 1 of this request's 2 decode steps")


def test_server_records_become_traces():
    rec = {"prompt_tokens": 2, "output_tokens": 2, "steps": [{"seconds": 0.02}], "url": "http://h:1", "model": "m",
           "prefill_seconds": 0.1}
    (trace,) = run_numbers.server_traces([rec])
    assert trace.source == "server" and trace.n_output == 2 and trace.steps[0].seconds == 0.02
