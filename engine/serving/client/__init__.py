"""Apart from both: a client that measures any OpenAI-compatible server (ours, vLLM, llama.cpp, ...)."""
