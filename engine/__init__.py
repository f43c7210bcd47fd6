"""Two Bends engine: a small real inference engine with separate prefill and decode phases.

Subpackages by role: core (the model and the two phases, what a student reads), loading (weights),
techniques (speculative decoding, prefix cache, int8, kernels, CUDA graphs), serving (scheduler,
worker, HTTP server, client), labs (measurements) and perfmodel (pure arithmetic). The names below
are the contract the rest of the project relies on (README: "The engine from the command line", "Layout").
"""
from engine.core.capture import capture_attention
from engine.core.generate import decode_step, generate, generate_batch, generate_no_cache, prefill
from engine.core.kv_cache import KVCache
from engine.core.metrics import PhaseSummary, summarize
from engine.core.sampling import SamplingParams
from engine.core.trace import AttentionCapture, DecodeStep, Trace
from engine.errors import EngineError
from engine.loading.loader import LoadedModel, load_model

__all__ = [
    "AttentionCapture", "DecodeStep", "EngineError", "KVCache", "LoadedModel", "PhaseSummary", "SamplingParams",
    "Trace", "capture_attention", "decode_step", "generate", "generate_batch", "generate_no_cache", "load_model",
    "prefill", "summarize",
]
