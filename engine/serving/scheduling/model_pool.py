"""The models a server holds: loaded once per (name, device, dtype, kernels), owned by the scheduler's thread.

`ModelInfo` is what consumers may know about a model without touching it: its config, tokenizer
(for counting and fitting prompts) and sizes. It pickles, so it crosses to the dashboard's process.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from engine.core.config import ModelConfig
from engine.errors import EngineError
from engine.loading.loader import load_model
from engine.serving.scheduling.work import ModelSpec
from engine.techniques.kernels import with_kernels

MAX_MODELS = 3  # models kept loaded at once (least recently used goes first)


@dataclass
class ModelInfo:
    spec: ModelSpec
    name: str
    device: str
    dtype: str
    config: ModelConfig
    tokenizer: object
    weight_bytes: int
    kernels: str
    load_seconds: float
    kernel_why: str = ""  # fast on CPU: the measured ms of each candidate kernel (engine/techniques/kernel_choice.py)


def describe(lm, spec: ModelSpec) -> ModelInfo:
    return ModelInfo(spec, lm.name, str(lm.device), lm.dtype_name, lm.config, lm.tokenizer, lm.weight_bytes,
                     lm.kernels, lm.load_seconds, getattr(lm, "kernel_why", ""))


class ModelPool:
    """Loaded models by spec. Not thread-safe on purpose: only the scheduler's thread calls it.

    The first thread that asks for a model owns the pool; any other thread is refused, so a load
    started elsewhere (a preload, a script) can never run beside the scheduler's work on the device."""

    def __init__(self, loader=load_model, max_models: int = MAX_MODELS):
        self._loader = loader
        self._models: OrderedDict[ModelSpec, object] = OrderedDict()
        self._max = max_models
        self.owner: threading.Thread | None = None  # the thread that may call get (set on its first call)

    def _check_thread(self) -> None:
        me = threading.current_thread()
        if self.owner is None:
            self.owner = me
        elif self.owner is not me:
            raise EngineError(f"the model pool belongs to thread '{self.owner.name}' (the scheduler's); thread "
                              f"'{me.name}' must submit a Job to load a model instead of calling the pool")

    def get(self, spec: ModelSpec, progress=None):
        self._check_thread()
        if spec in self._models:
            self._models.move_to_end(spec)
            return self._models[spec]
        twin = next((lm for s, lm in self._models.items() if replace(s, kernels=spec.kernels) == spec), None)
        if twin is not None:  # the same weights with the other kernels: share them, only re-pack
            lm = with_kernels(twin, spec.kernels)
        else:
            lm = self._loader(spec.name, device=spec.device, dtype=spec.dtype, progress=progress, kernels=spec.kernels)
        self._models[spec] = lm
        while len(self._models) > self._max:
            self._models.popitem(last=False)
        return lm

    def loaded(self, spec: ModelSpec) -> bool:
        return spec in self._models
