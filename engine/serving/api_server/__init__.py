"""The HTTP side: an OpenAI-compatible server over the scheduler, with vLLM's metric names."""
