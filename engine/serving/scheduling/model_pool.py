"""The models a server holds: loaded once per (name, device, dtype, kernels), owned by the scheduler's thread.

`ModelInfo` is what consumers may know about a model without touching it: its config, tokenizer
(for counting and fitting prompts) and sizes. It pickles, so it crosses to the dashboard's process.

With `background_kernels` (the dashboard's worker, for a fast start: docs/decisions/fast-start.md) a model asked
for with fast kernels is loaded with plain nn.Linear first, and its fast kernels are prepacked in a background thread.
Until they are ready the pool hands out the plain model under a label that says so: a run started meanwhile is timed on plain
nn.Linear, and its Trace's kernels say exactly that. Then, where a decode step of its own may serve (the C step, or
torch.compile's), the prepacked model runs (its label saying so) until that step is ready and the next `get` returns
it. Every stage is the same model with other backends (engine/core/backends.py).
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import replace

from engine.errors import EngineError
from engine.loading.loader import load_model
from engine.serving.scheduling.work import COMPILING, PENDING_DECODE_STEP, PENDING_KERNELS, PREPACKING, ModelInfo, ModelSpec
from engine.techniques.kernels import builds_decode_step, with_decode_step, with_kernels

MAX_MODELS = 3  # models kept loaded at once (least recently used goes first)
READY = "[two-bends] model ready"  # the terminal line when a model's final backends are in place (tests wait for it)


def say_ready(lm, note: str = "") -> None:
    """One terminal line: this model now runs on its final backends (what a measurement should wait for)."""
    name, kernels = getattr(lm, "name", "a model"), getattr(lm, "kernels", "its own kernels")  # tests' stand-ins too
    print(f"{READY}: {name} ({kernels}){note}", file=sys.stderr, flush=True)


def describe(lm, spec: ModelSpec) -> ModelInfo:
    kernels = lm.kernels
    if getattr(lm, "prepacking", None):  # described while its kernels were being prepared (the dashboard's start)
        kernels = (f"{lm.prepacking} (prepacked in the background at start; a run before that used plain nn.Linear, "
                   "and its Timing says so)")
    return ModelInfo(spec, lm.name, str(lm.device), lm.dtype_name, lm.config, lm.tokenizer, lm.weight_bytes,
                     kernels, lm.load_seconds, getattr(lm, "kernel_why", ""))




class _Packing:
    """The fast kernels of a loaded plain model, prepared in a background thread; `stand_in` runs meanwhile."""

    def __init__(self, plain, kernels: str):
        self.plain, self.result, self.error = plain, None, None
        self.early = None  # the prepacked kernels, while the decode step is still being compiled
        self.stand_in = replace(plain, backends=replace(plain.backends, pending=PENDING_KERNELS),
                                kernels=f"plain nn.Linear: the {kernels} kernels were {PREPACKING} when this started")
        self.stand_in.prepacking = kernels  # for describe
        self.thread = threading.Thread(target=self._run, args=(kernels,), name="two-bends-prepack", daemon=True)
        self.thread.start()

    def _run(self, kernels: str) -> None:
        try:
            fast = with_kernels(self.plain, kernels, decode_step=False)  # reads the shared weights: safe beside a run
            if builds_decode_step(fast):  # a decode step to build (or compile): serve fast meanwhile
                self.early = replace(fast, backends=replace(fast.backends, pending=PENDING_DECODE_STEP),
                                     kernels=f"{fast.kernels} ({COMPILING} when this started: this run's steps ran eager)")
            self.result = with_decode_step(fast)  # a new LoadedModel: a run going on `early` keeps its eager step
            say_ready(self.result)
        except Exception as exc:  # the next get loads the model the ordinary way and says what failed
            self.error = exc
            say_ready(self.plain, f"; its {kernels} kernels failed in the background ({exc}), so the next run loads them again")


class ModelPool:
    """Loaded models by spec. Not thread-safe on purpose: only the scheduler's thread calls it.

    The first thread that asks for a model owns the pool; any other thread is refused, so a load
    started elsewhere (a preload, a script) can never run beside the scheduler's work on the device."""

    def __init__(self, loader=load_model, max_models: int = MAX_MODELS, background_kernels: bool = False):
        self._loader = loader
        self._models: OrderedDict[ModelSpec, object] = OrderedDict()
        self._max = max_models
        self.owner: threading.Thread | None = None  # the thread that may call get (set on its first call)
        self.background_kernels = background_kernels  # plain weights first, fast kernels prepacked in a thread
        self._packing: dict[ModelSpec, _Packing] = {}

    def _check_thread(self) -> None:
        me = threading.current_thread()
        if self.owner is None:
            self.owner = me
        elif self.owner is not me:
            raise EngineError(f"the model pool belongs to thread '{self.owner.name}' (the scheduler's); thread "
                              f"'{me.name}' must submit a Job to load a model instead of calling the pool")

    def get(self, spec: ModelSpec, progress=None):
        self._check_thread()
        self._collect()
        if spec in self._models:
            self._models.move_to_end(spec)
            return self._models[spec]
        if spec in self._packing:  # its kernels are not ready yet: the plain model (or eager fast), labelled so
            return self._packing[spec].early or self._packing[spec].stand_in
        twin = next((lm for s, lm in self._models.items() if replace(s, kernels=spec.kernels) == spec), None)
        if twin is not None:  # the same weights with the other kernels: the same model, other backends
            lm = with_kernels(twin, spec.kernels)
        elif self.background_kernels and spec.kernels != "plain":
            plain = self._loader(spec.name, device=spec.device, dtype=spec.dtype, progress=progress, kernels="plain")
            self._store(replace(spec, kernels="plain"), plain)
            self._packing[spec] = _Packing(plain, spec.kernels)
            return self._packing[spec].stand_in
        else:
            lm = self._loader(spec.name, device=spec.device, dtype=spec.dtype, progress=progress, kernels=spec.kernels)
        self._store(spec, lm)
        say_ready(lm)
        return lm

    def _store(self, spec: ModelSpec, lm) -> None:
        self._models[spec] = lm
        while len(self._models) > self._max:
            self._models.popitem(last=False)

    def _collect(self) -> None:
        """Kernels finished in the background take the place of their stand-ins."""
        for spec, packing in list(self._packing.items()):
            if not packing.thread.is_alive():
                del self._packing[spec]
                if packing.result is not None:
                    self._store(spec, packing.result)

    def wait_for_kernels(self, timeout: float | None = None) -> None:
        """Block until every background prepacking finished (the scheduler's thread, or a test's own pool)."""
        for packing in list(self._packing.values()):
            packing.thread.join(timeout)
        self._collect()

    def loaded(self, spec: ModelSpec) -> bool:
        return spec in self._models
