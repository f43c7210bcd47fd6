"""llama.cpp's side of the bench's llama.cpp column: runs INSIDE llama.cpp's venv (scripts/setup_llamacpp.sh), never
imported by the project. The standard library, numpy and llama_cpp only.

    python -I llamacpp_worker.py GGUF THREADS KV_TYPE N_CTX FLASH_ATTN

loads the GGUF file with llama.cpp's C API (through llama-cpp-python's ctypes bindings), prints one JSON line
describing what it runs, then answers one JSON request a line on stdin with one JSON line on stdout:

    {"op": "prefill", "ids": [...]}             -> {"seconds": s}          an empty cache, all ids in one llama_decode
    {"op": "decode", "ids": [...], "steps": k}  -> {"seconds": [k floats], "tokens": [k + 1 ids]}
    {"op": "logits", "ids": [...]}              -> {"logits": [n_vocab floats]}  the last position's
    {"op": "quit"}

Times are taken here, around the C calls, so no pipe or JSON is inside them: prefill = llama_decode of the prompt up
to its last position's logits; a decode step = llama_decode of one token + the argmax of its logits (numpy, ~20 us)
+ the token as a Python int: the same work as one step of our decode_loop.
"""
from __future__ import annotations

import ctypes
import json
import sys
import time

import llama_cpp as ll
import numpy as np

GGML_TYPES = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}  # ggml.h's enum ggml_type
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}  # llama.h's enum llama_flash_attn_type
OPS = ("prefill", "decode", "logits")


class Engine:
    def __init__(self, path: str, threads: int, kv_type: str, n_ctx: int, flash_attn: str):
        ll.llama_backend_init()
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = ll.llama_model_load_from_file(path.encode(), mparams)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {path}")
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_ctx  # a whole prompt in one llama_decode call (it still runs n_ubatch tokens at a time)
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.type_k = cparams.type_v = GGML_TYPES[kv_type]
        cparams.flash_attn_type = FLASH_ATTN[flash_attn]
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise SystemExit(f"llama.cpp could not make a context for {path} (KV cache {kv_type}, n_ctx {n_ctx})")
        self.n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        desc = ctypes.create_string_buffer(256)
        ll.llama_model_desc(self.model, desc, len(desc))
        self.info = dict(llama_cpp_python=ll.__version__, model=desc.value.decode(), n_ctx=n_ctx,
                         n_batch=cparams.n_batch, n_ubatch=cparams.n_ubatch, threads=threads, kv_type=kv_type,
                         flash_attn_asked=flash_attn, system=ll.llama_print_system_info().decode().strip())

    def _run(self, ids: list[int]) -> np.ndarray:
        """Feed `ids` after what the cache holds; the last position's logits (a view: copy before the next call)."""
        tokens = (ll.llama_token * len(ids))(*ids)
        rc = ll.llama_decode(self.ctx, ll.llama_batch_get_one(tokens, len(ids)))  # logits for the last position only
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} for {len(ids)} tokens")
        return np.ctypeslib.as_array(ll.llama_get_logits_ith(self.ctx, -1), shape=(self.n_vocab,))  # waits for them

    def clear(self) -> None:
        ll.llama_memory_clear(ll.llama_get_memory(self.ctx), True)

    def prefill(self, ids: list[int]) -> dict:
        self.clear()
        start = time.perf_counter()
        self._run(ids)
        return {"seconds": time.perf_counter() - start}

    def decode(self, ids: list[int], steps: int) -> dict:
        self.clear()
        token = int(self._run(ids).argmax())
        tokens, seconds = [token], []
        for _ in range(steps):
            start = time.perf_counter()
            token = int(self._run([token]).argmax())
            seconds.append(time.perf_counter() - start)
            tokens.append(token)
        return {"seconds": seconds, "tokens": tokens}

    def logits(self, ids: list[int]) -> dict:
        self.clear()
        return {"logits": self._run(ids).tolist()}


def main() -> None:
    path, threads, kv_type, n_ctx, flash_attn = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
    engine = Engine(path, threads, kv_type, n_ctx, flash_attn)
    engine.decode(list(range(100, 132)), 2)  # untimed: the first call allocates and packs
    print(json.dumps(engine.info), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        op = req.pop("op")
        if op == "quit":
            break
        try:
            if op not in OPS:
                raise ValueError(f"unknown op {op!r} (one of {', '.join(OPS)}, quit)")
            out = getattr(engine, op)(**req)
        except Exception as exc:  # answered, not raised: the bench says what went wrong
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
