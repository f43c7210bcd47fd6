"""Techniques built on the core: speculative decoding, prefix caching, int8 weights, CUDA-graph replay, and the fast
paths a model may choose at load (kernels.py: matmul kernels, the C kernels, torch.compile's step), each measured on
this machine by one mechanism (fast_paths.py). Each one says which bend (prefill or decode) it helps."""
