"""numpy's OpenBLAS, called by address: row-major GEMMs that accumulate, for the ``openblas`` backend.

numpy's ``matmul`` cannot add into its output (BLAS's ``beta``), so a product with a bias
costs numpy's call, a fresh output and one more pass over it; on the 100-row products of AIS
that made the ``openblas`` backend slower than torch's although its kernel was faster
(docs/performance.md). The CBLAS entry points of the same library, looked up once with ctypes,
take ``alpha`` and ``beta`` and write into torch's memory directly. Compiled code
(:mod:`boltzlab.operators.one_region`) calls the same addresses inside its own parallel region.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["OpenBLASKernels", "gemm_into", "openblas_kernels"]

_ROW_MAJOR, _NO_TRANSPOSE, _TRANSPOSE = 101, 111, 112


@dataclass(frozen=True)
class OpenBLASKernels:
    """Addresses of numpy's OpenBLAS ``cblas_sgemm`` and ``cblas_dgemm``, for compiled code.

    :func:`gemm_into` calls them through ctypes; compiled code
    (:mod:`boltzlab.operators.one_region`) by address, inside its own parallel region.

    Attributes
    ----------
    sgemm, dgemm : int
        Function addresses (CBLAS signatures, row-major calls).
    ilp64 : bool
        Whether the library's integers are 64-bit (numpy's ``scipy_openblas64``).
    path : str
        The shared library they come from.
    set_num_threads : callable
        The library's ``openblas_set_num_threads`` (through ctypes).
    calls : dict
        ``torch.float32`` and ``torch.float64`` to the ctypes function with its argument types.
    """

    sgemm: int
    dgemm: int
    ilp64: bool
    path: str
    set_num_threads: Any
    calls: Any


# Symbol names of numpy's OpenBLAS builds (prefix, suffix), and whether integers are 64-bit.
_CBLAS_NAMES = (
    ("scipy_cblas_", "64_", True),
    ("cblas_", "64_", True),
    ("scipy_cblas_", "", False),
    ("cblas_", "", False),
)
_THREAD_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads",
)


@functools.cache
def openblas_kernels() -> OpenBLASKernels | None:
    """numpy's OpenBLAS GEMM entry points, or ``None`` where numpy uses another BLAS or they cannot be found."""
    try:
        from threadpoolctl import threadpool_info

        # numpy's own (its wheels bundle one under numpy.libs); else the only OpenBLAS loaded.
        loaded = [
            str(info["filepath"]) for info in threadpool_info() if info.get("internal_api") == "openblas"
        ]
        paths = [path for path in loaded if "numpy" in path] or (loaded if len(loaded) == 1 else [])
        if not paths:
            return None
        library = ctypes.CDLL(paths[0])
    except Exception:  # no threadpoolctl, no readable library: the caller keeps torch's GEMM
        return None
    for prefix, suffix, ilp64 in _CBLAS_NAMES:
        try:
            sgemm = getattr(library, f"{prefix}sgemm{suffix}")
            dgemm = getattr(library, f"{prefix}dgemm{suffix}")
        except AttributeError:
            continue
        setter = next((getattr(library, name) for name in _THREAD_SETTERS if hasattr(library, name)), None)
        if setter is None:
            return None  # without it a call inside a parallel region could start OpenBLAS's own pool
        setter.argtypes = [ctypes.c_int]
        setter.restype = None
        integer = ctypes.c_int64 if ilp64 else ctypes.c_int
        calls = {}
        for dtype, function, real in (
            (torch.float32, sgemm, ctypes.c_float),
            (torch.float64, dgemm, ctypes.c_double),
        ):
            function.restype = None
            function.argtypes = [ctypes.c_int] * 3 + [integer] * 3 + [real, ctypes.c_void_p, integer]
            function.argtypes += [ctypes.c_void_p, integer, real, ctypes.c_void_p, integer]
            calls[dtype] = function
        return OpenBLASKernels(
            sgemm=ctypes.cast(sgemm, ctypes.c_void_p).value or 0,
            dgemm=ctypes.cast(dgemm, ctypes.c_void_p).value or 0,
            ilp64=ilp64,
            path=paths[0],
            set_num_threads=setter,
            calls=calls,
        )
    return None


def _operand(x: Tensor) -> tuple[int, int] | None:
    """``(transpose flag, leading dimension)`` of a row-major matrix or a transposed view of one."""
    if x.is_contiguous():
        return _NO_TRANSPOSE, max(1, x.shape[1])
    if x.t().is_contiguous():
        return _TRANSPOSE, max(1, x.shape[0])
    return None


def gemm_into(
    kernels: OpenBLASKernels, out: Tensor, a: Tensor, b: Tensor, *, alpha: float, beta: float
) -> bool:
    """``out = alpha·(a @ b) + beta·out`` by OpenBLAS; ``False`` (nothing done) for what it cannot take.

    ``out`` (m, n) contiguous; ``a`` (m, k) and ``b`` (k, n) row-major or transposed views, all
    float32 or all float64 on the CPU. Anything else — other shapes, dtypes or devices, an empty
    dimension, an ``out`` sharing storage with ``a`` or ``b`` — returns ``False``, so that the
    caller's fallback raises torch's or numpy's usual error (BLAS itself would read and write
    past the buffers). The caller sets OpenBLAS's thread count.
    """
    if a.dim() != 2 or b.dim() != 2 or out.dim() != 2 or a.dtype not in (kernels.calls or {}):
        return False
    if not (a.dtype == b.dtype == out.dtype) or {a.device.type, b.device.type, out.device.type} != {"cpu"}:
        return False
    if a.shape[1] != b.shape[0] or out.shape != (a.shape[0], b.shape[1]) or 0 in (*a.shape, b.shape[1]):
        return False
    storage = out.untyped_storage().data_ptr()
    if storage in (a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()):
        return False
    first, second = _operand(a), _operand(b)
    if first is None or second is None or not out.is_contiguous():
        return False
    m, k = a.shape
    n = b.shape[1]
    kernels.calls[a.dtype](
        _ROW_MAJOR, first[0], second[0], m, n, k, alpha, a.data_ptr(), first[1],
        b.data_ptr(), second[1], beta, out.data_ptr(), max(1, n),
    )  # fmt: skip
    return True
