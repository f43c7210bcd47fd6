"""The inference core, the part a student reads: config, layers, model, KV cache, prefill/decode, sampling,
the Trace and its metrics. Nothing here knows about loading, serving, labs or the dashboard."""
