"""The inference core, the part a student reads: reference.py (the two phases on the eager forward), then config,
layers, model, KV cache, sampling, the Trace and its metrics; generate.py times the phases through the fast paths a
model chose at load (backends.py). Nothing here knows about loading, serving, labs, the dashboard or the machine's
other programs (engine/host watches those)."""
