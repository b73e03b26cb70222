"""Small C kernels built with the system's C compiler on first use and loaded with :mod:`ctypes`.

A plain C file builds in about a second, where a torch extension takes half a minute; the
library is cached under ``~/.cache/boltzlab/kernels`` (``BOLTZLAB_CACHE_DIR`` moves the folder)
with a name that carries a hash of the source, the flags and the CPU's instruction sets, so a
change of any of them builds afresh, and ``-march=native`` code built on one CPU is never
loaded on another that shares the folder. Used by :mod:`boltzlab.level_sums` (densities at
every level of a ladder) and :mod:`boltzlab.operators.categorical` (categorical draws).

Callers keep their own fallback: a failed build (no compiler, say) raises :class:`OSError` or
:class:`subprocess.SubprocessError`, which :class:`NativeKernel` (each kernel's mode, build and
load) turns into one warning and ``None``, and the caller into its torch path.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

from boltzlab.errors import ValidationError
from boltzlab.gemm import cache_path

__all__ = ["FLAGS", "NativeKernel", "compiled_library", "cpu_signature"]

#: What the kernels are built with. Not -ffast-math: linking a shared library with it makes GCC
#: add crtfastmath.o, which turns on flush-to-zero for the whole process when the library loads
#: (every later torch and numpy result would change), and its -ffinite-math-only would let NaN
#: inputs vanish. These flags are what the loops need to vectorise; NaN still propagates.
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp", "-shared", "-fPIC")


def compiled_library(stem: str, source: str, flags: tuple[str, ...] | list[str] = FLAGS) -> Path:
    """The shared library ``<stem>_<hash>.so`` built from ``source``, compiled when missing.

    The compiler is ``$CC`` (default ``cc``; ``CC="ccache gcc"`` is two words). The library is
    compiled to a temporary name and moved into place, so processes started together
    (torchrun) never load a half-written file. Raises :class:`OSError` when the compiler fails
    or is missing.
    """
    key = hashlib.sha256((source + " ".join(flags) + cpu_signature()).encode()).hexdigest()[:16]
    folder = cache_path().parent / "kernels"
    target = folder / f"{stem}_{key}.so"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    compiler = shlex.split(os.environ.get("CC", "cc")) or ["cc"]
    with tempfile.TemporaryDirectory(dir=folder) as work:
        source_file = Path(work) / f"{stem}.c"
        source_file.write_text(source)
        built = Path(work) / target.name
        result = subprocess.run(
            [*compiler, *flags, str(source_file), "-o", str(built), "-lm"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            raise OSError(f"{' '.join(compiler)} failed: {(result.stderr or result.stdout).strip()[:300]}")
        os.replace(built, target)
    return target


def cpu_signature() -> str:
    """This CPU's model name and instruction-set flags (Linux), else the platform and capability."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            return "".join(sorted({line for line in cpuinfo if line.startswith(("model name", "flags"))}))
    except OSError:
        return sys.platform + torch.backends.cpu.get_cpu_capability()


class NativeKernel:
    """One compiled kernel's life: its mode, its build on first use, one warning if that fails.

    The mode is ``"auto"``, ``"on"`` or ``"off"``: :meth:`set_mode`'s choice, else the
    environment variable ``environment_variable``, else ``"auto"``; what ``auto`` means is the
    caller's. :meth:`library` builds :func:`compiled_library` once (under a lock, so threads
    never build twice) and declares ``functions``' result and argument types; a build that fails
    leaves the reason in :attr:`broken`, warns once (``"the <what> could not be built (...);
    <fallback> (set <variable>=off to skip the attempt)"``) and returns ``None`` from then on.
    Used by :mod:`boltzlab.level_sums`, :mod:`boltzlab.sparse_product` and
    :mod:`boltzlab.operators.categorical`.

    Parameters
    ----------
    stem, source, flags
        As for :func:`compiled_library`.
    functions : tuple of str
        The exported C functions, all with ``restype`` and ``argtypes``.
    restype, argtypes
        Their ctypes result and argument types.
    environment_variable : str
    what : str
        The kernel in the warning ("level-sums kernel").
    fallback : str
        What runs instead, for the warning.
    """

    MODES = ("auto", "on", "off")

    def __init__(
        self,
        stem: str,
        source: str,
        *,
        functions: tuple[str, ...],
        restype: Any,
        argtypes: list[Any],
        environment_variable: str,
        what: str,
        fallback: str,
        flags: tuple[str, ...] | list[str] = FLAGS,
    ) -> None:
        self.stem, self.source, self.flags = stem, source, tuple(flags)
        self.functions, self.restype, self.argtypes = functions, restype, argtypes
        self.environment_variable, self.what, self.fallback = environment_variable, what, fallback
        self.chosen: str | None = None  # set_mode's choice; None reads the environment
        self.loaded: ctypes.CDLL | None = None
        self.broken: str | None = None  # why building failed, once it has
        self._lock = threading.Lock()

    def check_mode(self, name: Any, where: str) -> str:
        """``name`` lower-cased if it is a mode; :class:`ValidationError` naming ``where`` if not."""
        if not isinstance(name, str) or name.strip().lower() not in self.MODES:
            raise ValidationError(f"{where} must be one of {', '.join(self.MODES)}, got {name!r}")
        return name.strip().lower()

    def set_mode(self, name: str | None) -> None:
        """``"auto"``, ``"on"`` or ``"off"`` from now on; ``None``: the environment again."""
        if name is not None:
            self.check_mode(name, "set_mode")
        self.chosen = name

    def mode(self) -> str:
        """The mode in force: :meth:`set_mode`'s, else the environment's, else ``"auto"``."""
        name = self.chosen if self.chosen is not None else os.environ.get(self.environment_variable, "auto")
        return self.check_mode(name, self.environment_variable)

    def library(self) -> ctypes.CDLL | None:
        """The loaded library, built on first use; ``None`` (after one warning) if it cannot be."""
        with self._lock:
            if self.loaded is None and self.broken is None:
                try:
                    library = ctypes.CDLL(str(compiled_library(self.stem, self.source, self.flags)))
                    for name in self.functions:
                        function = getattr(library, name)
                        function.restype = self.restype
                        function.argtypes = self.argtypes
                    self.loaded = library
                except (OSError, subprocess.SubprocessError) as error:
                    text = str(error).strip()
                    self.broken = f"{type(error).__name__}: {text.splitlines()[0][:200] if text else ''}"
                    warnings.warn(
                        f"the {self.what} could not be built ({self.broken}); {self.fallback} (set "
                        f"{self.environment_variable}=off to skip the attempt)",
                        RuntimeWarning,
                        stacklevel=4,
                    )
        return self.loaded

    def require(self) -> ctypes.CDLL:
        """:meth:`library`, or :class:`RuntimeError` saying why it is not available."""
        library = self.library()
        if library is None:
            raise RuntimeError(f"the {self.what} is not available ({self.broken})")
        return library
