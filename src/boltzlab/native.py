"""Small C kernels built with the system's C compiler on first use and loaded with :mod:`ctypes`.

A plain C file builds in about a second, where a torch extension takes half a minute; the
library is cached under ``~/.cache/boltzlab/kernels`` (``BOLTZLAB_CACHE_DIR`` moves the folder)
with a name that carries a hash of the source, the flags and the CPU's instruction sets, so a
change of any of them builds afresh, and ``-march=native`` code built on one CPU is never
loaded on another that shares the folder. Used by :mod:`boltzlab.level_sums` (densities at
every level of a ladder) and :mod:`boltzlab.operators.categorical` (categorical draws).

Callers keep their own fallback: a failed build (no compiler, say) raises :class:`OSError` or
:class:`subprocess.SubprocessError`, which each caller turns into one warning and its torch path.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from boltzlab.gemm import cache_path

__all__ = ["FLAGS", "compiled_library", "cpu_signature"]

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
