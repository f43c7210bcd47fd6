"""`load_model`: pick a device and dtype, build our Transformer and pour a checkpoint's weights into it."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from engine.core.backends import EAGER, Backends, run_pass
from engine.core.config import ModelConfig
from engine.core.model import Transformer
from engine.errors import EngineError
from engine.loading.cache_folder import cache_root
from engine.loading.model_store import DEFAULT_MODEL, Progress, load_checkpoint
from engine.loading.weights import load_into

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    model: Transformer
    tokenizer: object  # transformers tokenizer (encode/decode, chat template)
    config: ModelConfig
    name: str
    device: torch.device
    dtype: torch.dtype
    load_seconds: float = 0.0
    source: str = ""  # what load_model was given (name, HF id or folder), to load the same weights again
    kernels: str = "plain"  # what its passes run, in words (engine/techniques/kernels.py writes them from `backends`)
    kernel_choice: str = "plain"  # what was asked for: "plain" (the eager reference) or "fast" (measured here)
    kernel_why: str = ""  # fast on CPU: what each fast path measured against its rival (engine/techniques/kernels.py)
    backends: Backends = field(default=EAGER)  # the fast paths chosen at load (engine/core/backends.py); EAGER: none

    def forward(self, ids: torch.Tensor, cache, **kwargs):
        """One forward pass through the path this model's backends have for it (Transformer.forward's arguments)."""
        return run_pass(self.model, self.backends, ids, cache, **kwargs)

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def weight_bytes(self) -> int:
        """Bytes of distinct parameter storage (tied matrices counted once)."""
        seen = {p.data_ptr(): p.numel() * p.element_size() for p in self.model.parameters()}
        return sum(seen.values())


def set_threads(threads: int) -> None:
    """torch's threads for the model (process-wide): 0 leaves torch's default, every core."""
    if not isinstance(threads, int) or threads < 0:
        raise EngineError(f"threads must be 0 (every core) or more (got {threads})")
    if threads:
        torch.set_num_threads(threads)


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise EngineError(f"unknown device '{device}'; use auto, cpu, cuda or mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise EngineError("device 'cuda' was asked for but no CUDA GPU is available here; pick device auto or cpu")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise EngineError("device 'mps' was asked for but Apple's Metal backend is not available here; "
                          "pick device auto or cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise EngineError(f"unknown device '{device}'; use auto, cpu, cuda or mps")
    return dev


def pick_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise EngineError(f"unknown dtype '{dtype}'; use one of {', '.join(DTYPES)}")
    dt = DTYPES[dtype]
    try:  # a matmul and a softmax in that dtype on that device, the two things the model needs
        a = torch.ones(4, 4, dtype=dt, device=device)
        torch.softmax(a @ a, dim=-1).sum().item()
    except (RuntimeError, TypeError) as exc:
        raise EngineError(f"{dtype} does not run on {device.type} here ({str(exc).splitlines()[0]}); try float32") from None
    return dt


def build_model(cfg: ModelConfig, hf_state_dict: dict, device: torch.device, dtype: torch.dtype) -> Transformer:
    with torch.device("meta"):
        model = Transformer(cfg)  # no memory, no random init: the checkpoint fills everything
    load_into(model, hf_state_dict, assign=True)  # parameters become the checkpoint's tensors, no extra copy
    for module in model.modules():  # non-persistent buffers (rotary tables) are not in the checkpoint
        for name, buf in module._buffers.items():
            if buf is not None and buf.is_meta:
                # (torch.empty, not empty_like: a meta tensor's empty_like goes through torch._refs, whose first use
                # imports sympy: ~1 s of the dashboard worker's start)
                module._buffers[name] = torch.empty(buf.shape, dtype=buf.dtype, device="cpu")
    if cfg.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight
    model.reset_buffers()
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def load_model(name_or_path: str = DEFAULT_MODEL, device: str = "auto", dtype: str = "float32",
               progress: Progress | None = None, kernels: str = "fast") -> LoadedModel:
    """Load a model ready for `prefill`, `decode_step` and `generate`.

    kernels: "fast" (default: the library kernels measured fastest on this machine, the measurement cached
    beside the model cache) or "plain" (nn.Linear).
    """
    from engine.techniques.kernels import KERNELS, prebuild, with_kernels

    if kernels not in KERNELS:
        raise EngineError(f"unknown kernels '{kernels}'; use one of {', '.join(KERNELS)}")
    start = time.perf_counter()
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    builds = prebuild(dev, kernels, cache_root())  # a first load's C builds, beside reading the weights
    ckpt = load_checkpoint(name_or_path, progress)
    cfg = ModelConfig.from_hf_config(ckpt.hf_config)
    tokenizer = ckpt.tokenizer
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in cfg.eos_token_ids:
        cfg = replace(cfg, eos_token_ids=(*cfg.eos_token_ids, tokenizer.eos_token_id))
    model = build_model(cfg, ckpt.state_dict, dev, dt)
    lm = LoadedModel(model, tokenizer, cfg, ckpt.name, dev, dt, 0.0, str(name_or_path))
    if progress and kernels == "fast" and dev.type == "cpu":
        from engine.techniques.kernels import builds_decode_step

        building = " and building the decode step" if builds_decode_step(replace(lm, kernel_choice="fast")) else ""
        progress(f"{ckpt.name}: choosing matmul kernels{building} (measured on a machine's first load, then read "
                 "from the cache)", 0.95)
    if builds is not None:
        builds.join()  # before anything is timed: a compiler beside a race would be timed too
    lm = with_kernels(lm, kernels, cache_root())
    if progress:
        progress(f"{ckpt.name} ready on {dev.type} ({dtype}, {lm.kernels})", 1.0)
    return replace(lm, load_seconds=time.perf_counter() - start)
