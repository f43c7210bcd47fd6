"""llama.cpp as a column of `python -m engine bench`: the same SmolLM2 weights at the same precision, the same prompt
ids and thread count, on this machine, timed in turn with our engine.

llama.cpp runs in its own venv outside the clone (scripts/setup_llamacpp.sh). The bench starts
engine/labs/llamacpp_worker.py there and speaks JSON lines with it; the worker times the C calls itself. What is
timed, the KV cache's type and why flash attention is off for f32 (with it llama.cpp casts float32 keys and values
to f16): docs/performance.md, "How it is timed". TWO_BENDS_LLAMACPP_FLASH_ATTN=auto|on|off overrides FLASH_ATTN.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from engine.errors import EngineError
from engine.loading.model_store import DEFAULT_MODEL

CACHE = Path(os.environ.get("TWO_BENDS_CACHE", Path.home() / ".cache" / "two-bends"))
VENV = Path(os.environ.get("TWO_BENDS_LLAMACPP_VENV", CACHE / "llamacpp-venv"))
MODELS_DIR = Path(os.environ.get("TWO_BENDS_LLAMACPP_MODELS", CACHE / "smollm2-135m-gguf"))
WORKER = Path(__file__).with_name("llamacpp_worker.py")
MODELS = (DEFAULT_MODEL, "smollm2", "smollm2-135m-instruct")  # the weights setup_llamacpp.sh converts
GGUF_TYPES = ("f32", "bf16", "f16", "q8_0")  # the files setup_llamacpp.sh writes
SAME_PRECISION = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}  # our dtype -> the GGUF at its precision
KV_TYPE = {"f32": "f32", "bf16": "bf16", "f16": "f16", "q8_0": "f16"}  # the KV cache each file runs with
FLASH_ATTN = {"f32": "off", "bf16": "auto", "f16": "auto", "q8_0": "auto"}  # float32 stays float32: module docstring


def gguf_path(gguf_type: str) -> Path:
    return MODELS_DIR / f"smollm2-135m-{gguf_type}.gguf"


def available(model: str, gguf_type: str) -> str | None:
    """Why llama.cpp can't be a column here (None when it can)."""
    if model.lower() not in MODELS:
        return f"the llama.cpp column is for the bundled SmolLM2 (setup_llamacpp.sh converts its weights), not {model}"
    if gguf_type not in GGUF_TYPES:
        return f"no {gguf_type} GGUF: setup_llamacpp.sh writes {', '.join(GGUF_TYPES)}"
    if not (VENV / ".two-bends-llamacpp-ready").is_file():
        return f"no llama.cpp venv at {VENV} (bash scripts/setup_llamacpp.sh builds it)"
    if not gguf_path(gguf_type).is_file():
        return f"no {gguf_path(gguf_type)} (bash scripts/setup_llamacpp.sh writes it)"
    return None


class LlamaCppPeer:
    """llama.cpp in its own process, loaded with one GGUF file; always stopped (use as a context manager)."""

    def __init__(self, threads: int, gguf_type: str, n_ctx: int = 2048, progress=print):
        self.gguf_type, self.kv_type = gguf_type, KV_TYPE[gguf_type]
        flash_attn = os.environ.get("TWO_BENDS_LLAMACPP_FLASH_ATTN", FLASH_ATTN[gguf_type])
        if flash_attn not in ("auto", "on", "off"):
            raise EngineError(f"TWO_BENDS_LLAMACPP_FLASH_ATTN must be auto, on or off (got {flash_attn!r})")
        self._log = tempfile.TemporaryFile()  # llama.cpp's own log (stderr): quoted when something fails
        progress(f"# starting llama.cpp ({gguf_type} GGUF, KV cache {self.kv_type}, {threads} threads)")
        self._proc = subprocess.Popen(
            [str(VENV / "bin" / "python"), "-I", str(WORKER), str(gguf_path(gguf_type)), str(threads), self.kv_type,
             str(n_ctx), flash_attn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.info = self._answer()
        self.info.update(gguf=str(gguf_path(gguf_type)), flash_attn=self._flash_attn_used())

    def __enter__(self) -> LlamaCppPeer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write('{"op": "quit"}\n')
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def _log_tail(self, lines: int = 3) -> str:
        self._log.seek(0)
        tail = self._log.read().decode(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(tail)

    def _flash_attn_used(self) -> str:
        """'on' or 'off' as the graph llama.cpp built says (its log names each FLASH_ATTN_EXT node), with what was
        asked for when that was 'auto'."""
        self._log.seek(0)
        used = "on" if "FLASH_ATTN_EXT" in self._log.read().decode(errors="replace") else "off"
        return f"{used} (auto)" if self.info["flash_attn_asked"] == "auto" else used

    def _answer(self) -> dict:
        line = self._proc.stdout.readline()  # the worker answers every request; EOF only if it died
        if not line:
            self._proc.wait()
            raise EngineError(f"llama.cpp's worker stopped (exit code {self._proc.returncode}): {self._log_tail()}")
        got = json.loads(line)
        if "error" in got:
            raise EngineError(f"llama.cpp: {got['error']}")
        return got

    def _ask(self, **request) -> dict:
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self._answer()

    def ttft(self, ids: list[int]) -> float:
        """Seconds for one llama_decode of `ids` into an empty cache, up to the last position's logits."""
        return self._ask(op="prefill", ids=ids)["seconds"]

    def decode_step(self, ids: list[int], steps: int) -> float:
        """Mean seconds of a decode step (one token + its argmax) after a prefill of `ids`, over `steps` steps."""
        return statistics.mean(self._ask(op="decode", ids=ids, steps=steps)["seconds"])

    def greedy_tokens(self, ids: list[int], n: int) -> list[int]:
        """The first `n` greedy tokens after `ids`."""
        return self._ask(op="decode", ids=ids, steps=n - 1)["tokens"]

    def logits(self, ids: list[int]) -> list[float]:
        """The last position's logits after `ids`."""
        return self._ask(op="logits", ids=ids)["logits"]


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where two token lists differ (None when they are the same)."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def compare_greedy(lm, peer: LlamaCppPeer, ids: list[int], n: int) -> dict:
    """Our engine's `n` greedy tokens after `ids` beside llama.cpp's, and how far the first step's logits are apart
    (max |difference| / max |logit|)."""
    import torch

    from engine.core.generate import generate, new_cache, prefill

    ours = generate(lm, ids, n, ignore_eos=True).output_ids
    theirs = peer.greedy_tokens(ids, n)
    with torch.inference_mode():
        mine = prefill(lm, torch.tensor([ids], device=lm.device), new_cache(lm, 1, len(ids) + 1))[0].float().cpu()
    other = torch.tensor(peer.logits(ids))
    return dict(ours=ours, theirs=theirs, first_difference=first_difference(ours, theirs),
                logit_gap=float((mine - other).abs().max() / mine.abs().max()))


def describe(info: dict) -> str:
    """One line: what llama.cpp ran with."""
    return (f"llama.cpp (llama-cpp-python {info['llama_cpp_python']}): {Path(info['gguf']).name} ({info['model']}), "
            f"KV cache {info['kv_type']}, {info['threads']} threads, flash attention {info['flash_attn']}, "
            f"micro-batches of {info['n_ubatch']} tokens")


def check(prompt_tokens: int = 32, new_tokens: int = 24) -> int:
    """scripts/setup_llamacpp.sh's check: llama.cpp's greedy tokens at float32 beside our engine's (the default,
    fast kernels) for a short prompt of real text. Prints both; 0 when they agree, 1 when not, 2 when unavailable."""
    import torch

    from engine.labs.sweeps import prompt_ids_of_length
    from engine.loading.loader import load_model

    why = available(DEFAULT_MODEL, "f32")
    if why:
        print(f"[check] {why}")
        return 2
    lm = load_model(DEFAULT_MODEL, "cpu", "float32")
    ids = prompt_ids_of_length(lm, prompt_tokens)
    with LlamaCppPeer(torch.get_num_threads(), "f32", progress=lambda s: None) as peer:
        got = compare_greedy(lm, peer, ids, new_tokens)
        print(f"[check] {describe(peer.info)}")
    where = got["first_difference"]
    print(f"[check] {prompt_tokens}-token prompt, {new_tokens} greedy tokens at float32: "
          + ("the same from both engines" if where is None else f"the first {where} agree, then ours "
             f"{got['ours'][where:where + 4]} vs llama.cpp's {got['theirs'][where:where + 4]}")
          + f"; first step's logits apart by {got['logit_gap']:.1e} of their largest")
    print(f"[check] ours:      {lm.tokenizer.decode(got['ours'])!r}")
    print(f"[check] llama.cpp: {lm.tokenizer.decode(got['theirs'])!r}")
    return 0 if where is None else 1


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="llama.cpp's greedy tokens at float32 beside our engine's "
                                     "(scripts/setup_llamacpp.sh's check); exit 0 same, 1 different, 2 not set up")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=24)
    opts = parser.parse_args()
    raise SystemExit(check(opts.prompt_tokens, opts.new_tokens))
