"""Decoding techniques built on the core: speculative decoding, prefix caching, int8 weights, faster
kernels and CUDA-graph replay. Each one says which bend (prefill or decode) it helps."""
