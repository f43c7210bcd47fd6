"""Building and loading the hand-written C kernels (decode_step.c, prompt_kernels.c) on this machine.

Each library is built at first use with the machine's C compiler (gcc -O3 -march=native -fopenmp -ffast-math,
about half a second), kept in the model cache under a name made of the source, the flags, the compiler, the CPU
and any instruction-set cap (so another machine, compiler or cap builds its own), and loaded with ctypes. The
kernels' OpenMP threads are torch's own (one libgomp in the process). -ffast-math is for the vectorised expf and
free reordering of sums; the kernels hold no infinities or NaNs of their own (their softmax starts from -FLT_MAX),
so it changes no result the source defines. Where the kernels cannot be built, `toolchain_fit` or the build says
why in one line, and the engine runs without them: a CPU that is not x86-64 (they are written and checked for
AVX2 and AVX-512), no C compiler, a compiler without OpenMP (Apple's clang).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import threading
from pathlib import Path

import torch

from engine.techniques.fast_paths import Fit
from engine.techniques.measured_cache import ISA_CAPS, cpu_identity

X86 = ("x86_64", "amd64")


class BuildError(RuntimeError):
    """The C compiler refused a kernel's source; the message is one line a user can act on."""


def c_compiler() -> str | None:
    """The C compiler to build the kernels with (CC, else gcc), None when there is none."""
    return shutil.which(os.environ.get("CC") or "gcc")


def toolchain_fit() -> Fit:
    """Whether the C kernels can be built here: an x86-64 CPU and a C compiler."""
    machine = platform.machine().lower()
    if machine not in X86:
        return Fit.no(f"the C kernels are written for x86-64 CPUs (AVX2, AVX-512); this one is {machine}", said=True)
    if c_compiler() is None:
        return Fit.no("no C compiler here (install gcc, or set CC)", said=True)
    return Fit.yes()


def flags() -> list[str]:
    """Compiling flags: -march=native, unless an instruction-set cap emulates a smaller CPU (as torch's and oneDNN's
    caps do); -ffast-math for compiling only (see `build`)."""
    arch = {"avx2": ["-mavx2", "-mfma"], "default": []}.get(os.environ.get("ATEN_CPU_CAPABILITY", ""), ["-march=native"])
    return ["-O3", *arch, "-fopenmp", "-ffast-math", "-fPIC"]


_BUILDING: dict[Path, threading.Lock] = {}  # one build of a library at a time in a process (a prebuild, then its user)
_BUILDING_LOCK = threading.Lock()


def build(folder: Path, source: Path) -> Path:
    """`source`'s library for this machine, built once into `folder` (named by what makes it) and reused."""
    cc = c_compiler()
    if cc is None:
        raise BuildError("no C compiler here (install gcc, or set CC)")
    caps = [os.environ.get(name, "") for name in ISA_CAPS]
    made_of = [source.read_text(), *flags(), *_version(cc), *cpu_identity(), *caps]
    path = folder / "c-kernels" / f"{source.stem}-{hashlib.sha256(repr(made_of).encode()).hexdigest()[:20]}.so"
    with _BUILDING_LOCK:
        lock = _BUILDING.setdefault(path, threading.Lock())
    with lock:  # a build already under way (prebuild) is waited for, not started again
        return path if path.is_file() else _compile(cc, source, path)


@functools.cache  # a compiler's version line, asked once per process
def _version(cc: str) -> tuple[str, ...]:
    return tuple(subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1])


def prebuild(folder: Path, sources: list[Path]) -> threading.Thread | None:
    """Build the libraries not built yet in a background thread (a first load: beside reading the weights, before
    anything is timed); None where there is nothing to build or no way to build it."""
    if not toolchain_fit().ok:
        return None

    def run() -> None:
        for source in sources:
            try:
                build(folder, source)
            except Exception:  # the fast path's own build says why, in its verdict
                pass

    thread = threading.Thread(target=run, name="two-bends-c-build", daemon=True)
    thread.start()
    return thread


def _compile(cc: str, source: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # compiled, then linked without -ffast-math: linked with it, gcc before 13 adds crtfastmath.o, whose constructor
    # would set flush-to-zero for the whole thread that loads the library (torch's numbers there too)
    for command in ([cc, *flags(), "-c", str(source), "-o", f"{tmp}.o"],
                    [cc, "-shared", "-fopenmp", f"{tmp}.o", "-o", str(tmp), "-lm"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            break
    Path(f"{tmp}.o").unlink(missing_ok=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        said = (done.stderr or done.stdout).strip()
        if "openmp" in said.lower() or "omp.h" in said:
            raise BuildError(f"{Path(cc).name} has no OpenMP (Apple's clang: install libomp, or use gcc and set CC)")
        raise BuildError(f"{Path(cc).name} failed: {' '.join(said.split())[-200:]}")
    os.replace(tmp, path)  # whole or not at all: another process may be reading the folder
    return path


def load(path: Path, abi_function: str, abi: int) -> ctypes.CDLL:
    """The built library, its `abi_function()` checked against `abi`; a file that cannot be loaded is removed (the
    next load builds it again)."""
    try:
        lib = ctypes.CDLL(str(path))
        if getattr(lib, abi_function)() != abi:
            raise OSError(f"{path.name} was built for another interface")
    except (OSError, AttributeError):
        path.unlink(missing_ok=True)
        raise
    return lib


def layout(struct: type[ctypes.Structure]) -> list[int]:
    """sizeof and every field's offset, as ctypes lays the structure out (what the C source's layout function gives)."""
    return [ctypes.sizeof(struct)] + [getattr(struct, name).offset for name, _ in struct._fields_]


class Pinned:
    """Tensors whose addresses a C structure holds: kept alive here as long as the structure may be read."""

    def __init__(self):
        self._held: dict[str, torch.Tensor] = {}

    def address(self, name: str, tensor: torch.Tensor) -> int:
        """`tensor`'s data address, the tensor held under `name` (replacing what was held there)."""
        self._held[name] = tensor
        return tensor.data_ptr()

    def held(self, name: str) -> torch.Tensor:
        return self._held[name]

    def release(self, *names: str) -> None:
        for name in names:
            self._held.pop(name, None)
