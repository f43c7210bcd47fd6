"""The HTTP side: an OpenAI-compatible server over the scheduler, with vLLM's metric names."""

WORKER_DEFAULT = "thread"  # where `engine serve` runs the scheduler (docs/decisions/worker-process.md); here so
# the CLI can build its parser without importing FastAPI and torch
