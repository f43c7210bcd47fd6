"""Two Bends engine: a small real inference engine with separate prefill and decode phases.

Subpackages by role: core (the model and the two phases, what a student reads), host (what the machine does
beside a run), loading (weights), techniques (speculative decoding, prefix cache, int8, kernels, CUDA graphs), serving (scheduler,
worker, HTTP server, client), labs (measurements) and perfmodel (pure arithmetic). The names below
are the contract the rest of the project relies on (README: "The engine from the command line", "Layout").
They are imported on first use (PEP 562), so `import engine.x` costs no torch import until x needs it:
the dashboard's launcher starts the engine worker before it imports anything heavy.
"""
import importlib

_WHERE = {
    "capture_attention": "engine.core.capture",
    "decode_step": "engine.core.generate", "generate": "engine.core.generate", "generate_batch": "engine.core.generate",
    "generate_no_cache": "engine.core.generate", "prefill": "engine.core.generate",
    "KVCache": "engine.core.kv_cache",
    "PhaseSummary": "engine.core.metrics", "summarize": "engine.core.metrics",
    "SamplingParams": "engine.core.sampling_params",
    "AttentionCapture": "engine.core.trace", "DecodeStep": "engine.core.trace", "Trace": "engine.core.trace",
    "EngineError": "engine.errors",
    "LoadedModel": "engine.loading.loader", "load_model": "engine.loading.loader",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'engine' has no attribute '{name}'")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
