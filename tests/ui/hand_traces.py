"""Traces built by hand for the ui tests: known timings, no model needed."""
from engine.core.trace import DecodeStep, Trace


def hand_trace(prefill_s: float, step_s: list[float], n_prompt: int = 16, model: str = "hand") -> Trace:
    """A Trace with these timings: a prefill of prefill_s, then one decode step per entry of step_s."""
    n_out = len(step_s) + 1
    steps = [DecodeStep(s, n_prompt + i + 1, (n_prompt + i + 1) * 100) for i, s in enumerate(step_s)]
    return Trace(model=model, device="cpu", dtype="float32", prompt_ids=list(range(n_prompt)),
                 output_ids=list(range(n_out)), text="x" * n_out, prefill_seconds=prefill_s, steps=steps,
                 env={"torch": "test"}, kv_bytes_per_token=100, settings={"temperature": 0.0, "chat": False})
