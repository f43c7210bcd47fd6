"""Two Bends engine: a small real inference engine with separate prefill and decode phases."""
from engine.errors import EngineError
from engine.generate import capture_replay, decode_step, generate, generate_batch, generate_no_cache, prefill
from engine.kv_cache import KVCache
from engine.loader import LoadedModel, load_model
from engine.metrics import PhaseSummary, summarize
from engine.trace import AttentionCapture, DecodeStep, Trace

__all__ = [
    "AttentionCapture", "DecodeStep", "EngineError", "KVCache", "LoadedModel", "PhaseSummary", "Trace",
    "capture_replay", "decode_step", "generate", "generate_batch", "generate_no_cache", "load_model",
    "prefill", "summarize",
]
